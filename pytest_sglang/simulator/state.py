"""The running simulator's shared state (configuration, engine, status, trace)."""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field

from pytest_sglang.simulator.config import SimConfig
from pytest_sglang.simulator.images.multimodal import Media
from pytest_sglang.simulator.logs import Logger
from pytest_sglang.simulator.scheduling.engine import Engine
from pytest_sglang.simulator.scheduling.trace import Trace

STARTING, UP, UNHEALTHY = "Starting", "Up", "UnHealthy"


@dataclass
class State:
    cfg: SimConfig
    engine: Engine
    log: Logger
    trace: Trace
    argv: list[str]
    port: int
    times: dict[str, float]
    status: str = STARTING
    up_perf: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    http_requests: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    http_responses: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    #: requests being served, by (path, method): sglang:http_requests_active
    http_active: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    storage_backend: str | None = None
    #: images: decoded ones remembered by content, the multimodal embedding cache (multimodal.py)
    media: Media = field(default_factory=Media)

    @property
    def health_generation(self) -> bool:
        return os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "true").lower() not in (
            "0",
            "false",
            "no",
        )

    @property
    def health_timeout_s(self) -> float:
        return float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))

    def broken(self) -> bool:
        """True once the ``unhealthy-after`` fault has fired (the scheduler is stuck)."""
        after = self.cfg.faults.unhealthy_after_s
        if after is None or self.status == STARTING:
            return False
        if time.perf_counter() - self.up_perf >= self.cfg.scaled(after):
            self.engine.stalled = True
            return True
        return False
