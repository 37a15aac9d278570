"""Settings validation failures as one ConfigError line: the setting, the bad value, what is allowed and where
it can come from. pydantic's own text ("Input should be ...", error URLs) never reaches the user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from indexer.errors import ConfigError

_ENV_PREFIX = "INDEXER_"


def settings_error(exc: Exception, config_file: Path | None = None) -> ConfigError:
    """Translate a pydantic ``ValidationError``, a pydantic-settings ``SettingsError`` or a TOML syntax error."""
    where = f" in {config_file}" if config_file is not None else ""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            items = errors()
        except Exception:  # not a pydantic ValidationError after all
            items = None
        if items:
            return ConfigError("; ".join(_one(item, where) for item in items))
    text = " ".join(str(exc).split())
    if type(exc).__name__ == "TOMLDecodeError":
        return ConfigError(
            f"the config file{where} is not valid TOML ({text}); fix it or point INDEXER_CONFIG elsewhere"
        )
    if "error parsing value for field" in text:  # pydantic-settings: a complex value in an environment variable
        field = text.split('"')[1] if text.count('"') >= 2 else "?"
        return ConfigError(
            f"invalid setting {field}: {_ENV_PREFIX}{field.upper()} must be a JSON list, e.g. "
            f'{_ENV_PREFIX}{field.upper()}=\'["*.md"]\''
        )
    return ConfigError(
        f"invalid settings: {text}; check the flags, {_ENV_PREFIX}* variables and the config file{where}"
    )


def _one(item: dict[str, Any], where: str) -> str:
    field = ".".join(str(part) for part in item.get("loc", ())) or "settings"
    value = item.get("input")
    sources = f"(a flag, {_ENV_PREFIX}{field.upper()} or `{field} = ...`{where})"
    return f"invalid setting {field}={_show(value)}: {_allowed(item)} {sources}"


def _allowed(item: dict[str, Any]) -> str:
    kind = item.get("type", "")
    ctx = item.get("ctx") or {}
    if kind == "literal_error":
        return f"use {ctx.get('expected', 'one of the listed values')}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most",
              "less_than": "less than"}[kind]
        bound = next(iter(ctx.values()), "?")
        return f"must be {op} {bound}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind in ("bool_parsing", "bool_type"):
        return "must be true or false"
    if kind in ("tuple_type", "list_type"):
        return 'must be a list, e.g. ["*.md", "*.txt"]'
    if kind == "string_type":
        return "must be text"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    message = str(item.get("msg", "is invalid"))
    return message.replace("Input should be", "must be").replace("Value error, ", "")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
