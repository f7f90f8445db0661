"""A simulator whose speed is known: one token per running request per decode step of STEP_S seconds."""

from __future__ import annotations

from typing import Any

import pytest

STEP_S = 0.2 * 0.05  # --sim-decode-step-ms 200 at the test simulator's time scale 0.05
MODEL = ("--sim-decode-step-ms", "200", "--sim-decode-step-per-req-ms", "0", "--enable-metrics")
SHAPE: dict[str, Any] = dict(requests=16, concurrency=8, input_len=64, output_len=32)


@pytest.fixture
def sim_url(sim_factory: Any) -> str:
    url: str = sim_factory(*MODEL).url
    return url
