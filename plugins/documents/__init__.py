"""Document readers: Office (docx, pptx, xlsx), CSV, OpenDocument (odt, ods, odp), EPUB, RTF, e-mail (eml, mbox)
and Jupyter notebooks. Each is a reader plugin registered through the ``indexer.readers`` entry point; each
imports its parsing library lazily and reports a missing one with the command that installs it."""
