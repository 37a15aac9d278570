"""Each limit and default is written once and read by every front end (issue: Ports): the query code's
defaults are the settings' defaults, the HTTP schema states the same caps the query code checks, and the CLI's
help prints the settings' defaults rather than restating them."""

from __future__ import annotations

from typer.testing import CliRunner

from indexer.cli.main import app
from indexer.search.query import QueryLimits
from indexer.server.schemas import SearchBody
from indexer.settings import Settings, default
from indexer.types import MAX_CLAUSES, MAX_FACETS


def test_query_limits_default_to_the_settings_defaults():
    limits, settings = QueryLimits(), Settings()
    assert limits == QueryLimits.from_settings(settings)
    assert limits.mode == settings.search_mode == default("search_mode")


def test_the_http_schema_states_the_caps_the_query_code_checks():
    schema = SearchBody.model_json_schema()
    where = schema["properties"]["where"]
    assert {"type": "array", "maxItems": MAX_CLAUSES}.items() <= next(
        s for s in where["anyOf"] if s.get("type") == "array").items()
    assert schema["properties"]["facets"]["maxItems"] == MAX_FACETS


def test_the_cli_help_prints_the_settings_defaults():
    runner = CliRunner()

    def shown(*args: str) -> str:  # the help text without its box and line wrapping
        return " ".join(runner.invoke(app, [*args, "--help"]).stdout.replace("│", " ").split())

    search = shown("search")
    assert f"(default {default('top_k')})" in search and f"(default {default('candidates')})" in search
    assert f"(default: {default('search_mode')})" in search
    index = shown("index")
    assert f"{default('store')} (default)" in index


def test_one_helper_resolves_a_users_path():
    """``~``, the working directory, links and ``..``: resolved by core/paths.py's user_path alone."""
    import re
    from pathlib import Path

    from indexer.core.paths import user_path

    root = Path(__file__).resolve().parents[2]
    found = [f"{p.relative_to(root)}:{n}" for package in ("indexer", "plugins") for p in (root / package).rglob("*.py")
             if p.name != "paths.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"expanduser\(\)\s*\.\s*resolve\(", line)]
    assert not found, f"use indexer.core.paths.user_path: {found}"
    assert user_path("~") == Path.home().resolve() and user_path("a/../b") == (Path.cwd() / "b").resolve()
