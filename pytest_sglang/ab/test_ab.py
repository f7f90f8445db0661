"""An interleaved A/B run of the run's configuration (A) and ``--sglang-ab-*`` (B), judged on paired launches."""

from __future__ import annotations

from pytest_sglang.ab import load_spec
from pytest_sglang.plugin.ab import ABRunner


def test_ab(sglang_ab: ABRunner) -> None:
    sglang_ab(load_spec())
