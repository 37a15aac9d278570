"""The command line (a front end): the console script's light entry, the typer app and its sub-commands.

Kept empty so ``indexer.cli.entry`` (the console script) imports nothing heavy."""
