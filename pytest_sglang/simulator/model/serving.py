"""The launch flags that change what the simulated model answers, and the sampling rules.

Sampling: ``temperature`` defaults to 1.0. Greedy requests (temperature 0 or top_k 1) are
deterministic. 0.5.23 honours ``seed`` / ``sampling_seed`` only with
``--enable-deterministic-inference`` (default seed 42 there); otherwise sampled outputs differ
from request to request whatever the seed (recorded on the real server), and so do the simulator's.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sglang.simulator.state import State

__all__ = ["Parsers", "Serving", "sample_key", "sampled", "serving"]


@dataclass(frozen=True)
class Parsers:
    """The server's ``--tool-call-parser`` and ``--reasoning-parser`` (None: not set)."""

    tool_call: str | None = None
    reasoning: str | None = None


@dataclass(frozen=True)
class Serving:
    parsers: Parsers
    #: ``--grammar-backend`` (0.5.23's default: xgrammar; "none" refuses every grammar)
    grammar_backend: str | None
    #: ``--enable-deterministic-inference``: sampled requests honour ``seed``/``sampling_seed``
    deterministic: bool


def serving(state: State) -> Serving:
    extra = state.cfg.args.passthrough

    def text(name: str) -> str | None:
        value = extra.get(name)
        return None if value is None else str(value)

    return Serving(
        parsers=Parsers(tool_call=text("tool_call_parser"), reasoning=text("reasoning_parser")),
        grammar_backend=text("grammar_backend") or "xgrammar",
        deterministic=bool(extra.get("enable_deterministic_inference")),
    )


def sampled(temperature: object, top_k: object) -> bool:
    """Whether a request samples (0.5.23's default temperature is 1.0) rather than decodes greedily."""
    greedy = isinstance(temperature, (int, float)) and float(temperature) == 0.0
    return not greedy and top_k != 1


def sample_key(sampled: bool, seed: int | None, *, deterministic: bool, draw: int) -> int | None:
    """The key mixed into a request's generation seed.

    None for greedy; the seed (42 by default) with --enable-deterministic-inference; otherwise a fresh
    ``draw`` (the seed is ignored, as 0.5.23 ignores it).
    """
    if not sampled:
        return None
    if deterministic:
        return 42 if seed is None else seed
    return draw
