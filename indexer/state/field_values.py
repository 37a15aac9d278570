"""What the state records of a chunk's metadata and location values (``chunk_fields`` rows): each value as written,
folded to lower case, and as a number when it reads as one (numbers as numbers, dates as seconds since the epoch)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

MAX_VALUE_CHARS = 512  # longer metadata values are kept (and matched) up to this many characters
BUILTIN = ("path", "type", "modified", "size")

__all__ = ["BUILTIN", "MAX_VALUE_CHARS", "chunk_values", "field_rows", "typed"]


# -- writing ---------------------------------------------------------------------------------------------------
def field_rows(point_id: str, values: Iterable[tuple[str, Any]]) -> list[tuple[str, str, str, str, float | None, str]]:
    """(point_id, name, value, folded, num, kind) rows for one chunk's metadata and location values."""
    rows: list[tuple[str, str, str, str, float | None, str]] = []
    seen = set()
    for name, value in values:
        key = str(name).strip().lower()
        if not key or key in seen or key in BUILTIN or value is None or isinstance(value, (dict, list, tuple)):
            continue
        seen.add(key)
        text = str(value)[:MAX_VALUE_CHARS]
        num, kind = typed(value)
        rows.append((point_id, key, text, text.lower(), num, kind))
    return rows


def typed(value: Any) -> tuple[float | None, str]:
    """(number, kind) of a metadata value: numbers as numbers, dates (ISO 8601 or e-mail) as epoch seconds."""
    if isinstance(value, bool):
        return None, "text"
    if isinstance(value, (int, float)):
        return float(value), "number"
    text = str(value).strip()
    if not text or len(text) > 64:
        return None, "text"
    try:
        return float(text), "number"
    except ValueError:
        pass
    moment = _date(text)
    return (moment, "date") if moment is not None else (None, "text")


def _date(text: str) -> float | None:
    if text[:1].isdigit() and len(text) >= 10 and text[4:5] == "-":
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
    if "," in text or ":" in text:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
    return None


def chunk_values(payload: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A chunk's metadata and location values, the metadata's first (as ``--meta`` always looked them up)."""
    meta = payload.get("metadata") or {}
    location = payload.get("location") or {}
    out = list(meta.items()) if isinstance(meta, Mapping) else []
    out += list(location.items()) if isinstance(location, Mapping) else []
    return out
