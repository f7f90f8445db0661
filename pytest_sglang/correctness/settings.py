"""The acceptance suite's knobs, in the engine's words (the plugin maps options onto these fields)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from pytest_sglang import defaults
from pytest_sglang.errors import ConfigError


@dataclass(frozen=True)
class AcceptanceSettings:
    """How hard each check looks and what it tolerates.

    ``samples``: requests per check. ``max_tokens``: output tokens per request. ``min_match_rate``:
    the floor for identical greedy outputs across batch sizes and concurrency when the server runs
    without ``--enable-deterministic-inference`` (with it, the floor is 1.0). ``max_kl``: the mean
    KL estimate allowed between cached and cold logprobs (SGLang's own CI uses 0.002-0.02).
    ``concurrency``: the most requests sent at once (capped by the server's running-request limit).
    ``check_timeout_s`` / ``suite_timeout_s``: the deadline of one check and of the whole suite
    (:mod:`.deadline`); a check stops at its first stalled request. ``max_vision_share``: the most
    share of a new image's first-token time the vision encoder may take (:mod:`.image_checks`).
    """

    samples: int = defaults.ACCEPTANCE_SAMPLES
    max_tokens: int = defaults.ACCEPTANCE_MAX_TOKENS
    request_timeout_s: float = defaults.ACCEPTANCE_REQUEST_TIMEOUT_S
    min_match_rate: float = defaults.ACCEPTANCE_MIN_MATCH_RATE
    max_kl: float = defaults.ACCEPTANCE_MAX_KL
    concurrency: int = defaults.ACCEPTANCE_CONCURRENCY
    disconnect_timeout_s: float = defaults.ACCEPTANCE_DISCONNECT_TIMEOUT_S
    check_timeout_s: float = defaults.ACCEPTANCE_CHECK_TIMEOUT_S
    suite_timeout_s: float = defaults.ACCEPTANCE_SUITE_TIMEOUT_S
    max_vision_share: float = defaults.ACCEPTANCE_MAX_VISION_SHARE

    def __post_init__(self) -> None:
        for name in ("samples", "max_tokens", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"AcceptanceSettings({name}=...)", value, "must be an integer >= 1",
                                  f"pass {name}=8 or another positive integer")
        for name in ("request_timeout_s", "disconnect_timeout_s", "max_kl", "check_timeout_s", "suite_timeout_s"):
            value = getattr(self, name)
            if not _number(value) or value <= 0:
                raise ConfigError(f"AcceptanceSettings({name}=...)", value, "must be a finite number > 0",
                                  f"pass {name}= a positive number")
        for name, example in (("min_match_rate", "0.8"), ("max_vision_share", "0.5")):
            value = getattr(self, name)
            if not _number(value) or not 0 <= value <= 1:
                raise ConfigError(f"AcceptanceSettings({name}=...)", value,
                                  "must be a fraction between 0 and 1", f"pass {name}={example}, for example")

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
