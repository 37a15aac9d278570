"""Mail text is never dropped in silence: a multipart message without a usable boundary keeps its body, a
message the email package cannot parse is left out and named, and a mailbox past ``max_messages`` is read up
to the cap with a note that names the setting. Files are made by the standard library's ``mailbox`` and
``email`` (the real writers); the run reports the notes as "partly read"."""

from __future__ import annotations

import mailbox
from email.message import EmailMessage
from pathlib import Path

import pytest

from indexer.errors import SourceError
from indexer.types import Document, IndexReport, SourceRef
from plugins.documents.mail import MAX_MESSAGES, MailReader

BROKEN_BOUNDARY = (
    b"From: Ada <ada@example.org>\nTo: team@example.org\nSubject: Secret pumps\nMIME-Version: 1.0\n"
    b'Content-Type: multipart/mixed; boundary=""\n\nThe pump budget for the eastern station is 4,200 euros.\n'
)
# The standard library raises AttributeError reading this To header (a group inside an address list).
UNPARSEABLE = b"From: x@example.org\nSubject: Broken\nTo: a:b:c;d\n\nThis message cannot be parsed.\n"


def read(reader: MailReader, path: Path) -> Document:
    data = path.read_bytes()
    return reader.read(SourceRef(str(path.parent), str(path), len(data), 0), data)


def _message(number: int) -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = f"Note {number}"
    msg["From"] = "Grace <grace@example.org>"
    msg["To"] = "team@example.org"
    msg.set_content(f"Body of note number {number}.")
    return msg


def _mbox(path: Path, count: int, extra: list[bytes] = ()) -> Path:  # type: ignore[assignment]
    box = mailbox.mbox(str(path))
    for number in range(1, count + 1):
        box.add(_message(number))
    for raw in extra:
        box.add(raw)
    box.flush()
    box.close()
    return path


@pytest.mark.parametrize("content_type", [b'boundary=""', b"boundary="])
def test_a_multipart_message_with_an_empty_boundary_keeps_its_body(tmp_path, content_type):
    path = tmp_path / "broken.eml"
    path.write_bytes(BROKEN_BOUNDARY.replace(b'boundary=""', content_type))
    doc = read(MailReader(), path)
    assert "pump budget for the eastern station" in doc.text and "Secret pumps" in doc.text
    assert doc.notes and "without a usable boundary" in doc.notes[0]


def test_a_mailbox_past_max_messages_is_read_to_the_cap_and_says_so(tmp_path):
    path = _mbox(tmp_path / "box.mbox", 120)
    doc = read(MailReader().with_options({"max_messages": 50}), path)
    assert dict(doc.metadata)["messages"] == 50
    assert "Body of note number 50." in doc.text and "Body of note number 51." not in doc.text
    assert doc.notes == ("only the first 50 of 120 messages were read (max_messages; raise reader_options "
                         "email.max_messages to read them all)",)  # fmt: skip
    whole = read(MailReader(), path)
    assert dict(whole.metadata)["messages"] == 120 and whole.notes == () and MAX_MESSAGES == 100_000


def test_a_message_that_cannot_be_parsed_is_left_out_and_named_the_others_are_read(tmp_path):
    path = _mbox(tmp_path / "box.mbox", 3, [UNPARSEABLE])
    doc = read(MailReader(), path)
    assert dict(doc.metadata)["messages"] == 3 and "Body of note number 3." in doc.text
    assert len(doc.notes) == 1
    assert doc.notes[0].startswith("1 message(s) could not be parsed and were left out: 4 (AttributeError")


def test_a_file_whose_only_message_cannot_be_parsed_fails_with_the_reason(tmp_path):
    path = tmp_path / "bad.eml"
    path.write_bytes(UNPARSEABLE)
    with pytest.raises(SourceError, match="no e-mail message found.*could not be parsed"):
        read(MailReader(), path)


def test_unknown_mail_options_are_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="max_messages"):
        MailReader().with_options({"max_mesages": 5})


def test_the_report_lists_partly_read_files():
    report = IndexReport(partial=[("/r/box.mbox", "only the first 50 of 120 messages were read")])
    assert report.to_dict()["partial"] == [{"path": "/r/box.mbox", "reason": "only the first 50 of 120 messages "
                                            "were read"}]  # fmt: skip
