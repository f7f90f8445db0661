"""``--sim-fault KIND[:ARG]``: failure modes a test can ask the simulator to reproduce.

Durations in fault arguments are simulated seconds, multiplied by ``--sim-time-scale`` like
every other simulated duration. The correctness faults (``wrong-answer`` ... ``token-drift``) each
reproduce one way a server answers 200 OK and wrong, so a correctness check can be shown to fail.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang.simulator.failures.pd import PD_KINDS, check_pd_fault
from pytest_sglang.simulator.failures.production import (
    PRODUCTION_KINDS,
    ProductionFaults,
    check_production_fault,
    parse_production_faults,
)
from pytest_sglang.simulator.failures.registration import REGISTRATION_KINDS, check_registration_fault
from pytest_sglang.simulator.scheduling.storage import STORAGE_KINDS, check_storage_fault

#: Startup phases in order (names accepted by crash-at / oom-kill-at / hang-at).
PHASES = ("weights", "kv_cache", "cuda_graph", "hicache", "uvicorn", "warmup")
SERVER_INFO_MODES = ("missing-field", "wrong-type", "not-json")
KINDS = (
    "crash-at",
    "oom-kill-at",
    "hang-at",
    "never-healthy",
    "unhealthy-after",
    "server-info",
    "drop-stream-after",
    "stall-stream-after",
    "error-rate",
    "slow-health",
    # correctness faults: 200 OK, wrong content
    "wrong-answer",
    "tool-call-as-text",
    "json-schema-violation",
    "reasoning-in-content",
    "empty-finish-reason",
    "usage-off-by-one",
    "cross-talk",
    "cache-logprob-drift",
    "slot-leak",
    "token-drift",
    # image faults (multimodal.py): the image is not seen, its tokens miscounted, its encoder slow
    "image-ignored",
    "image-tokens-miscounted",
    "vision-slow",
    *PD_KINDS,  # prefill-decode faults: validated and parsed by pd_faults.py
    *PRODUCTION_KINDS,  # weights, speculative decoding, probes: production_faults.py
    *STORAGE_KINDS,  # the L3 storage tier: storage_tier.py
    *REGISTRATION_KINDS,  # what a gateway reads when it registers a worker: registration_faults.py
)
#: Kinds that take no argument (a switch), and kinds whose argument is a fraction in [0, 1].
SWITCHES = (
    "never-healthy",
    "tool-call-as-text",
    "json-schema-violation",
    "reasoning-in-content",
    "empty-finish-reason",
    "usage-off-by-one",
    "cross-talk",
    "slot-leak",
    "image-ignored",
    "image-tokens-miscounted",
)
RATES = ("error-rate", "wrong-answer", "token-drift")
_NUMBERS = ("unhealthy-after", "slow-health", "drop-stream-after", "stall-stream-after", "cache-logprob-drift",
            *RATES)


@dataclass(frozen=True)
class Faults:
    crash_at: frozenset[str] = frozenset()
    oom_kill_at: frozenset[str] = frozenset()
    hang_at: frozenset[str] = frozenset()
    never_healthy: bool = False
    unhealthy_after_s: float | None = None
    server_info: str | None = None
    drop_stream_after: int | None = None
    #: streams fall silent after N tokens and never end (no [DONE]); the connection stays open
    stall_stream_after: int | None = None
    error_rate: float = 0.0
    slow_health_s: float = 0.0
    #: the fraction of arithmetic answers that are wrong
    wrong_answer: float = 0.0
    #: the tool-call parser is not applied: the call stays in ``content`` as text
    tool_call_as_text: bool = False
    #: constrained JSON output violates its schema
    json_schema_violation: bool = False
    #: the reasoning parser is not applied: ``<think>...</think>`` stays in ``content``
    reasoning_in_content: bool = False
    #: streamed and final ``finish_reason`` is "" instead of null / the reason
    empty_finish_reason: bool = False
    #: ``usage.completion_tokens`` (and native ``completion_tokens``) one more than returned
    usage_off_by_one: bool = False
    #: concurrent requests decode each other's tokens
    cross_talk: bool = False
    #: logprobs served from a cached prefix are shifted by this much
    cache_logprob_drift: float = 0.0
    #: a client that disconnects mid-stream never frees its slot
    slot_leak: bool = False
    #: the fraction of (greedy) tokens that differ from the fault-free server's
    token_drift: float = 0.0
    #: images are counted and encoded, but the answer is the one without them
    image_ignored: bool = False
    #: image token counts one merge block short on each side of the processor's grid
    image_tokens_miscounted: bool = False
    #: the vision encoder's time per patch multiplied by this
    vision_slow: float = 1.0
    specs: tuple[str, ...] = field(default=())

    @property
    def production(self) -> ProductionFaults:
        """The weights, speculative-decoding and probe faults (:mod:`.production`)."""
        return parse_production_faults(self.specs)

    def at(self, phase: str) -> str | None:
        """The startup fault to trigger at ``phase`` (crash-at / oom-kill-at / hang-at) or None."""
        for kind, phases in (
            ("crash-at", self.crash_at),
            ("oom-kill-at", self.oom_kill_at),
            ("hang-at", self.hang_at),
        ):
            if phase in phases:
                return kind
        return None


def _bad(spec: str, why: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"--sim-fault {spec!r}: {why}")


def check_fault(spec: str) -> str:
    """Argparse ``type=``: validate one ``KIND[:ARG]`` and return it unchanged."""
    kind, _, arg = spec.partition(":")
    if kind not in KINDS:
        raise _bad(spec, f"unknown fault kind {kind!r}; choose one of {', '.join(KINDS)}")
    if kind in PD_KINDS:
        return check_pd_fault(spec)
    if kind in PRODUCTION_KINDS:
        return check_production_fault(spec)
    if kind in STORAGE_KINDS:
        return check_storage_fault(spec)
    if kind in REGISTRATION_KINDS:
        return check_registration_fault(spec)
    if kind in ("crash-at", "oom-kill-at", "hang-at") and arg not in PHASES:
        raise _bad(spec, f"phase {arg!r} is not one of {', '.join(PHASES)} (e.g. {kind}:weights)")
    if kind == "server-info" and arg not in SERVER_INFO_MODES:
        raise _bad(spec, f"mode {arg!r} is not one of {', '.join(SERVER_INFO_MODES)}")
    if kind in SWITCHES and arg:
        raise _bad(spec, f"{kind} takes no argument (e.g. --sim-fault {kind})")
    if kind == "vision-slow":
        try:
            factor = float(arg)
        except ValueError:
            raise _bad(spec, "vision-slow needs the encoder's slow-down factor, e.g. vision-slow:3") from None
        if not math.isfinite(factor) or factor < 1:
            raise _bad(spec, f"vision-slow must be a factor >= 1 (1 is a healthy encoder), got {arg!r}")
    if kind in _NUMBERS:
        try:
            value = float(arg)
        except ValueError:
            raise _bad(spec, f"{kind} needs a number, e.g. {kind}:{'0.1' if kind in RATES else '5'}") from None
        if not math.isfinite(value) or value < 0 or (kind in RATES and value > 1):
            raise _bad(spec, f"{kind} must be {'between 0 and 1' if kind in RATES else '>= 0'}")
    return spec


def parse_faults(specs: list[str] | tuple[str, ...]) -> Faults:
    crash: set[str] = set()
    oom: set[str] = set()
    hang: set[str] = set()
    values: dict[str, Any] = {}
    for spec in specs:
        kind, _, arg = check_fault(spec).partition(":")
        if kind in (*PD_KINDS, *PRODUCTION_KINDS, *STORAGE_KINDS, *REGISTRATION_KINDS):  # their modules read specs
            continue
        if kind == "crash-at":
            crash.add(arg)
        elif kind == "oom-kill-at":
            oom.add(arg)
        elif kind == "hang-at":
            hang.add(arg)
        elif kind == "never-healthy":
            values["never_healthy"] = True
        elif kind == "server-info":
            values["server_info"] = arg
        elif kind in ("drop-stream-after", "stall-stream-after"):
            values[kind.replace("-", "_")] = int(float(arg))
        elif kind == "unhealthy-after":
            values["unhealthy_after_s"] = float(arg)
        elif kind in ("error-rate", "wrong-answer", "token-drift", "cache-logprob-drift"):
            values[kind.replace("-", "_")] = float(arg)
        elif kind == "vision-slow":
            values["vision_slow"] = float(arg)
        elif kind in SWITCHES:
            values[kind.replace("-", "_")] = True
        else:
            values["slow_health_s"] = float(arg)
    return Faults(
        crash_at=frozenset(crash),
        oom_kill_at=frozenset(oom),
        hang_at=frozenset(hang),
        specs=tuple(specs),
        **values,
    )
