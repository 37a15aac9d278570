"""E-mail: single messages (.eml) and mailboxes (.mbox), read with the standard library (email, mailbox).

Every message is a section (``message 2: Budget — Linus Torvalds <linus@example.org>, 2026-03-04``; fields
``message``, ``subject``, ``sender``, ``date``) whose chunks carry the message's subject, sender, recipients and
date as metadata (filterable: ``SearchRequest(metadata=(("sender", "linus"),))``). The text is the subject as a
heading, the From/To/Date lines, then the body: the plain-text part, else the HTML part as text; attached files
are named, their content is not read. Outlook's .msg is not read (see docs/formats.md).
"""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import parsedate_to_datetime

from indexer.plugin_api import Document, SourceError, SourceRef
from plugins.documents._common import DocumentReader, TextBuilder

_FROM_LINE = re.compile(rb"^From .*$", re.M)
MAX_MESSAGES = 100_000


def _iso_date(value: str) -> str:
    try:
        return parsedate_to_datetime(value).isoformat()
    except (TypeError, ValueError, IndexError):
        return value.strip()


def _body(msg: EmailMessage) -> str:
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


def _messages(data: bytes, mbox: bool) -> Iterator[EmailMessage]:
    if not mbox:
        yield email.message_from_bytes(data, policy=email.policy.default)
        return
    starts = [m.start() for m in _FROM_LINE.finditer(data)]
    if not starts or starts[0] != 0 and data[: starts[0]].strip():
        starts = [0, *starts]
    for i, start in enumerate(starts[:MAX_MESSAGES]):
        end = starts[i + 1] if i + 1 < len(starts) else len(data)
        chunk = data[start:end]
        if chunk.startswith(b"From "):
            chunk = chunk.split(b"\n", 1)[1] if b"\n" in chunk else b""
        chunk = re.sub(rb"^>(>*From )", rb"\1", chunk, flags=re.M)  # mboxrd/mboxo quoting
        if chunk.strip():
            yield email.message_from_bytes(chunk, policy=email.policy.default)


class MailReader(DocumentReader):
    kind = "email"
    extensions = (".eml", ".mbox", ".mbx")
    reads_text = True

    def read(self, ref: SourceRef, data: bytes) -> Document:
        mbox = not ref.path.lower().endswith(".eml")
        out = TextBuilder(self.limits, ref)
        count = 0
        for number, msg in enumerate(_messages(data, mbox), start=1):
            try:
                subject = " ".join(str(msg.get("subject", "") or "").split())
                sender = " ".join(str(msg.get("from", "") or "").split())
                to = " ".join(str(msg.get("to", "") or "").split())
                date = _iso_date(str(msg.get("date", "") or ""))
                body = _body(msg)
                attachments = [a.get_filename() or a.get_content_type() for a in msg.iter_attachments()]
            except Exception as exc:  # the email package raises many types on broken headers
                reason = f"message {number} cannot be parsed ({type(exc).__name__}: {exc})"
                raise SourceError(ref.path, reason) from None
            count += 1
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
                out.block("Attachments: " + ", ".join(str(a) for a in attachments))
        if count == 0:
            raise SourceError(ref.path, "no e-mail message found in the file")
        return out.document(ref, self.kind, {"messages": count})
