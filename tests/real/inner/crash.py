"""Inner tests run by pytester: both need a server whose launch dies (HiCache on CPU)."""

from __future__ import annotations


def test_first_needs_server(sglang_server):
    raise AssertionError("unreachable: the server cannot start")


def test_second_needs_server(sglang_server):
    raise AssertionError("unreachable: the server cannot start")
