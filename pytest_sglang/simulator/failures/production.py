"""The production ``--sim-fault`` kinds: failures that pass every one-moment gate (issue 20).

``corrupt-weights``          one tensor's weights differ from the model path's (``/weights_checker``
                             answers another checksum; every answer still looks fine)
``spec-collapse``            speculative decoding accepts no draft token: acceptance length 1.00, and
                             each step still pays for the drafts (slower than without speculation)
``spec-slow``                acceptance is as configured but each verify step costs as much as the
                             tokens it accepts: no speedup over decoding without speculation
``spec-decay-after:TOKENS``  a request's drafts are accepted with probability 0.15 once its context
                             (prompt + generated) passes TOKENS tokens: speculation helps short prompts
                             only (sglang#30763: MTP's accept rate 0.19 beyond 32K of context)
``spec-rank-low:K``          requests on data-parallel rank K (pinned by ``routed_dp_rank``, or dealt to
                             it round-robin) accept drafts with probability 0.15 (sglang#16274: EAGLE's
                             accept length 2.35 -> 1.48 with DP attention)
``health-under-load:S``      while requests are running, ``/health`` answers S (simulated) seconds later
                             (the health generation waits behind long prefills, sglang#22511)
``stalled-dp-rank:K``        data-parallel rank K never produces a token; ``/health`` stays 200
                             (sglang PR#32949). The simulator's one engine stands for every rank: the
                             requests pinned to rank K (``routed_dp_rank``) or given to it by the round-robin
                             balancer (0.5.23's default ``--load-balance-method``) hang
``leak:MB_PER_MIN``          the simulator's host memory (its real RSS) grows by MB_PER_MIN megabytes a
                             minute, wall clock (:mod:`~pytest_sglang.simulator.launch.leak`; capped, so a forgotten simulator cannot
                             eat the host), as the hierarchical-cache host-index leak did (sglang PR#21624)
``kv-leak:TOKENS``           every finished request keeps TOKENS of its KV tokens for ever: the free KV
                             tokens (``sglang:kv_available_tokens``) drift down as the allocator leak of
                             sglang#11970 did
``stall-after:N``            after N generation requests the server still accepts connections (and
                             ``/health`` answers) but completes nothing more (sglang#22779: requests hang
                             after a near-constant count)
``weights-checker:MODE``     ``/weights_checker`` gives no checksum: ``garbage`` (HTML), ``huge`` (a 100 MB
                             body), ``unauthorized`` (401), ``hang`` (never answers), ``wrong-types`` (JSON
                             of the wrong shape) or ``failure`` (400, ``success: false``)
``no-profile-route``         no ``/start_profile`` or ``/stop_profile`` route (404): a server whose profiler
                             cannot be driven over HTTP
``template-tokens:N``        every prompt is N tokens longer than the client sent (a chat template or
                             special tokens added again): the server computes, and reports as
                             ``prompt_tokens``, tokens the client never meant to send

Kept apart from :mod:`.faults` (which only routes these kinds here), as the PD kinds are.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

PRODUCTION_KINDS = ("corrupt-weights", "spec-collapse", "spec-slow", "health-under-load", "stalled-dp-rank", "leak",
                    "kv-leak", "stall-after", "weights-checker", "template-tokens", "spec-decay-after", "spec-rank-low",
                    "no-profile-route")
#: How ``/weights_checker`` fails under ``weights-checker:MODE``.
WEIGHTS_CHECKER_MODES = ("garbage", "huge", "unauthorized", "hang", "wrong-types", "failure")
#: A leak beyond this many MB a minute is a typo (1 GB a second), not a slow leak.
MAX_LEAK_MB_PER_MIN = 60_000.0
#: More added tokens than this is a typo, not a template.
MAX_TEMPLATE_TOKENS = 100_000
#: Longer contexts than any model serves (as LoadSpec's MAX_LEN).
MAX_CONTEXT_TOKENS = 1_048_576
_SWITCHES = ("corrupt-weights", "spec-collapse", "spec-slow", "no-profile-route")


@dataclass(frozen=True)
class ProductionFaults:
    corrupt_weights: bool = False
    spec_collapse: bool = False
    spec_slow: bool = False
    health_under_load_s: float = 0.0
    stalled_dp_rank: int | None = None
    leak_mb_per_min: float = 0.0
    kv_leak_tokens: int = 0
    spec_decay_after: int | None = None
    no_profile_route: bool = False
    spec_rank_low: int | None = None
    stall_after: int | None = None
    weights_checker: str | None = None
    template_tokens: int = 0


def _bad(spec: str, why: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"--sim-fault {spec!r}: {why}")


def check_production_fault(spec: str) -> str:
    """Argparse ``type=`` for these kinds: validate ``KIND[:ARG]`` and return it unchanged."""
    kind, sep, arg = spec.partition(":")
    if kind in _SWITCHES:
        if sep:
            raise _bad(spec, f"{kind} takes no argument (e.g. --sim-fault {kind})")
    elif kind == "health-under-load":
        try:
            value = float(arg)
        except ValueError:
            raise _bad(spec, "health-under-load needs seconds, e.g. health-under-load:3") from None
        if not math.isfinite(value) or value < 0:
            raise _bad(spec, "health-under-load must be >= 0 seconds")
    elif kind == "stalled-dp-rank":
        if not arg.isdigit():
            raise _bad(spec, "stalled-dp-rank needs a rank number, e.g. stalled-dp-rank:1 (with --dp-size 2)")
    elif kind == "leak":
        _check_leak(spec, arg)
    elif kind == "kv-leak":
        if not arg.isdigit() or int(arg) == 0:
            raise _bad(spec, "kv-leak needs a whole number of tokens > 0 each request keeps, e.g. kv-leak:16")
    elif kind == "stall-after":
        if not arg.isdigit():
            raise _bad(spec, "stall-after needs a whole number of requests, e.g. stall-after:100")
    elif kind == "weights-checker":
        if arg not in WEIGHTS_CHECKER_MODES:
            raise _bad(spec, f"weights-checker needs one of {', '.join(WEIGHTS_CHECKER_MODES)}, e.g. "
                             "weights-checker:hang")
    elif kind == "template-tokens":
        if not arg.isdigit() or not 0 < int(arg) <= MAX_TEMPLATE_TOKENS:
            raise _bad(spec, f"template-tokens needs a whole number of tokens from 1 to {MAX_TEMPLATE_TOKENS:,} "
                             "added to every prompt, e.g. template-tokens:12")
    elif kind in ("spec-decay-after", "spec-rank-low"):
        _check_spec_fault(spec, kind, arg)
    else:
        raise _bad(spec, f"unknown fault kind {kind!r}; choose one of {', '.join(PRODUCTION_KINDS)}")
    return spec


def _check_spec_fault(spec: str, kind: str, arg: str) -> None:
    if kind == "spec-decay-after" and (not arg.isdigit() or not 0 < int(arg) <= MAX_CONTEXT_TOKENS):
        raise _bad(spec, f"spec-decay-after needs a whole number of context tokens from 1 to {MAX_CONTEXT_TOKENS:,} "
                         "beyond which drafts are rarely accepted, e.g. spec-decay-after:4096")
    if kind == "spec-rank-low" and not arg.isdigit():
        raise _bad(spec, "spec-rank-low needs a rank number, e.g. spec-rank-low:1 (with --dp-size 2)")


def _check_leak(spec: str, arg: str) -> None:
    try:
        value = float(arg)
    except ValueError:
        raise _bad(spec, "leak needs megabytes per minute, e.g. leak:10") from None
    if not math.isfinite(value) or not 0 < value <= MAX_LEAK_MB_PER_MIN:
        raise _bad(spec, f"leak must be > 0 and at most {MAX_LEAK_MB_PER_MIN:,.0f} MB per minute, e.g. leak:10")


def with_template(ids: list[int], faults: ProductionFaults) -> list[int]:
    """``ids`` as the server computes them: with ``template-tokens:N``, N tokens (id 1) more."""
    return ids + [1] * faults.template_tokens if faults.template_tokens else ids


def parse_production_faults(specs: Iterable[str]) -> ProductionFaults:
    """These faults among all ``--sim-fault`` specs (other kinds are ignored)."""
    out = ProductionFaults()
    for spec in specs:
        kind, _, arg = spec.partition(":")
        if kind not in PRODUCTION_KINDS:
            continue
        check_production_fault(spec)
        if kind in _SWITCHES:
            out = replace(out, corrupt_weights=out.corrupt_weights or kind == "corrupt-weights",
                          spec_collapse=out.spec_collapse or kind == "spec-collapse",
                          spec_slow=out.spec_slow or kind == "spec-slow",
                          no_profile_route=out.no_profile_route or kind == "no-profile-route")
        elif kind == "health-under-load":
            out = replace(out, health_under_load_s=float(arg))
        elif kind == "leak":
            out = replace(out, leak_mb_per_min=float(arg))
        elif kind == "kv-leak":
            out = replace(out, kv_leak_tokens=int(arg))
        elif kind == "stall-after":
            out = replace(out, stall_after=int(arg))
        elif kind == "weights-checker":
            out = replace(out, weights_checker=arg)
        elif kind == "template-tokens":
            out = replace(out, template_tokens=int(arg))
        elif kind == "spec-decay-after":
            out = replace(out, spec_decay_after=int(arg))
        elif kind == "spec-rank-low":
            out = replace(out, spec_rank_low=int(arg))
        else:
            out = replace(out, stalled_dp_rank=int(arg))
    return out
