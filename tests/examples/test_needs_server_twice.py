"""Inner test file: two tests need the server; a failed start is shown in full once."""

from __future__ import annotations


def test_first(sglang_server):
    assert sglang_server.health() == 200


def test_second(sglang_server):
    assert sglang_server.health() == 200


def test_without_server():
    assert True
