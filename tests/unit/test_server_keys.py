"""API key scopes (our logic): read vs admin, the announced token, header parsing."""

from __future__ import annotations

from indexer.server.security import KeyRing, is_admin_path, key_from_headers


def test_scopes_and_the_announced_token() -> None:
    ring = KeyRing(["r1"], ["a1"], ["token"])
    assert ring.enabled
    assert ring.scope_of("r1") == "read" and ring.scope_of("a1") == "admin" and ring.scope_of("token") == "admin"
    assert ring.scope_of("r") is None and ring.scope_of("") is None


def test_the_token_alone_does_not_turn_auth_on() -> None:
    assert not KeyRing([], [], ["token"]).enabled
    assert KeyRing([], ["a"]).enabled and KeyRing(["r"], []).enabled


def test_headers_and_admin_paths() -> None:
    assert key_from_headers([(b"authorization", b"Bearer  abc ")]) == "abc"
    assert key_from_headers([(b"authorization", b"bearer abc")]) == "abc"
    assert key_from_headers([(b"authorization", b"Basic abc")]) is None
    assert key_from_headers([(b"x-api-key", b"k")]) == "k"
    assert is_admin_path("POST", "/collections/default/sync")
    assert not is_admin_path("GET", "/collections") and not is_admin_path("POST", "/search")
