"""E-mail: single messages (.eml) and mailboxes (.mbox), read with the standard library (email, mailbox).

Every message is a section (``message 2: Budget — Linus Torvalds <linus@example.org>, 2026-03-04``; fields
``message``, ``subject``, ``sender``, ``date``) whose chunks carry the message's subject, sender, recipients and
date as metadata (filterable: ``SearchRequest(metadata=(("sender", "linus"),))``). The text is the subject as a
heading, the From/To/Date lines, then the body: the plain-text part, else the HTML part as text; attached files
are named, their content is not read. Outlook's .msg is not read (see docs/formats.md).

Nothing is dropped in silence: a message whose MIME structure is broken (a multipart with no or an empty
boundary) has its raw body indexed as text; a message that cannot be parsed is left out and named; a mailbox
past ``max_messages`` (reader option, default 100,000) is read up to the cap. Each of these is a note on the
document (``Document.notes``), which the run reports as "partly read".
"""

from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage
from email.utils import parsedate_to_datetime

from indexer.plugin_api import Document, SourceError, SourceRef
from indexer.plugin_api.parts import part_done
from plugins.documents._common import DocumentReader, TextBuilder

_FROM_LINE = re.compile(rb"^From .*$", re.M)
MAX_MESSAGES = 100_000


def _iso_date(value: str) -> str:
    try:
        return parsedate_to_datetime(value).isoformat()
    except (TypeError, ValueError, IndexError):
        return value.strip()


def _raw_body(msg: EmailMessage) -> str:
    """The body of a message whose structure is broken (``multipart`` with no usable boundary: the email
    package keeps it as one string), decoded as text."""
    payload = msg.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return str(msg.get_payload() or "")
    try:
        return payload.decode(msg.get_content_charset() or "utf-8", "replace")
    except LookupError:  # an unknown charset
        return payload.decode("utf-8", "replace")


def _broken_multipart(msg: EmailMessage) -> bool:
    return msg.get_content_maintype() == "multipart" and not msg.is_multipart()


def _body(msg: EmailMessage) -> str:
    if _broken_multipart(msg):
        return _raw_body(msg)
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset or a broken transfer encoding
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload or "")
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        from bs4 import BeautifulSoup

        content = BeautifulSoup(content, "html.parser").get_text("\n")
    return content


def message_spans(data: bytes, mbox: bool) -> list[tuple[int, int]]:
    """Where each message lies in the file: one span for an .eml, one per ``From `` line for an mbox."""
    if not mbox:
        return [(0, len(data))]
    starts = [m.start() for m in _FROM_LINE.finditer(data)]
    if not starts or starts[0] != 0 and data[: starts[0]].strip():
        starts = [0, *starts]
    return [(start, starts[i + 1] if i + 1 < len(starts) else len(data)) for i, start in enumerate(starts)]


def _parse(chunk: bytes, mbox: bool) -> EmailMessage | None:
    if mbox:
        if chunk.startswith(b"From "):
            chunk = chunk.split(b"\n", 1)[1] if b"\n" in chunk else b""
        chunk = re.sub(rb"^>(>*From )", rb"\1", chunk, flags=re.M)  # mboxrd/mboxo quoting
    if not chunk.strip():
        return None
    return email.message_from_bytes(chunk, policy=email.policy.default)


class MailReader(DocumentReader):
    kind = "email"
    extensions = (".eml", ".mbox", ".mbx")
    reads_text = True

    def known_options(self) -> tuple[str, ...]:
        return ("max_messages",)

    def read(self, ref: SourceRef, data: bytes) -> Document:
        mbox = not ref.path.lower().endswith(".eml")
        cap = int(self.options.get("max_messages", MAX_MESSAGES))
        out = TextBuilder(self.limits, ref)
        notes: list[str] = []
        broken: list[str] = []
        count = 0
        spans = message_spans(data, mbox)
        for number, (start, end) in enumerate(spans[:cap], start=1):
            part_done()
            try:
                msg = _parse(data[start:end], mbox)
                if msg is None:
                    continue
                fields = _fields(msg)
            except Exception as exc:  # the email package raises many types on broken headers
                broken.append(f"{number} ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")
                continue
            count += 1
            if _broken_multipart(msg):
                notes.append(f"message {number}: multipart without a usable boundary; its raw body is indexed as text")
            _write(out, number, *fields)
        if len(spans) > cap:
            notes.append(f"only the first {cap:,} of {len(spans):,} messages were read (max_messages; raise "
                         f"reader_options email.max_messages to read them all)")
        if broken:
            notes.append(f"{len(broken)} message(s) could not be parsed and were left out: "
                         + "; ".join(broken[:20]) + (" ..." if len(broken) > 20 else ""))
        if count == 0:
            raise SourceError(ref.path, "no e-mail message found in the file"
                              + (f" ({notes[-1]})" if broken else ""))
        return out.document(ref, self.kind, {"messages": count}, notes)


def _fields(msg: EmailMessage) -> tuple[str, str, str, str, str, list[str]]:
    subject = " ".join(str(msg.get("subject", "") or "").split())
    sender = " ".join(str(msg.get("from", "") or "").split())
    to = " ".join(str(msg.get("to", "") or "").split())
    date = _iso_date(str(msg.get("date", "") or ""))
    body = _body(msg)
    attachments = [] if _broken_multipart(msg) else [
        str(a.get_filename() or a.get_content_type()) for a in msg.iter_attachments()]
    return subject, sender, to, date, body, attachments


def _write(out: TextBuilder, number: int, subject: str, sender: str, to: str, date: str, body: str,
           attachments: list[str]) -> None:
    label = f"message {number}: {subject or '(no subject)'} — {sender}" + (f", {date[:10]}" if date else "")
    fields = (("message", number), ("subject", subject), ("sender", sender), ("date", date))
    metadata = (("subject", subject), ("sender", sender), ("to", to), ("date", date))
    out.section(label, fields, tuple((k, v) for k, v in metadata if v))
    out.heading(1, subject or "(no subject)")
    for name, value in (("From", sender), ("To", to), ("Date", date)):
        out.line(f"{name}: {value}" if value else "")
    out.end_paragraph()
    for paragraph in re.split(r"\n\s*\n", body.replace("\r\n", "\n")):
        out.block(paragraph)
    if attachments:
        out.block("Attachments: " + ", ".join(attachments))
