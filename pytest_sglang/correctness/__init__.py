"""Correctness checks of a running SGLang server, usable without pytest.

Each check takes a :class:`~pytest_sglang.correctness.context.CheckContext` (an httpx client bound
to the server, its :class:`~pytest_sglang.correctness.features.ServerFeatures` and the
:class:`~pytest_sglang.correctness.settings.AcceptanceSettings`) and returns a
:class:`~pytest_sglang.correctness.result.CheckReport`; ``report.raise_if_failed()`` raises
:class:`~pytest_sglang.correctness.result.CheckFailed` (an ``AssertionError``) listing every problem.
A check that needs something the server does not offer raises
:class:`~pytest_sglang.correctness.result.Unsupported` with the reason.

The acceptance suite (``pytest --pyargs pytest_sglang.acceptance``) is one thin test per check.
"""

from __future__ import annotations

from pytest_sglang.correctness.context import CheckContext
from pytest_sglang.correctness.features import ServerFeatures, fetch_features, read_features
from pytest_sglang.correctness.result import CheckFailed, CheckReport, Unsupported
from pytest_sglang.correctness.settings import AcceptanceSettings

__all__ = [
    "AcceptanceSettings",
    "CheckContext",
    "CheckFailed",
    "CheckReport",
    "ServerFeatures",
    "Unsupported",
    "fetch_features",
    "read_features",
]
