"""Fixtures for the plugin's end-to-end tests; helpers live in plugin_helpers.py."""

from __future__ import annotations

import pytest

from pytest_sglang.plugin import settings


@pytest.fixture(autouse=True)
def _clean_sglang_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outer environment must not leak PYTEST_SGLANG_* settings into inner runs."""
    for option in settings.OPTIONS:
        monkeypatch.delenv(option.env, raising=False)
    monkeypatch.delenv("SGLANG_API_KEY", raising=False)
