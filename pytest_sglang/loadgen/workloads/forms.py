"""Real-workload dataset forms: recorded traces (``mooncake:PATH``, ``burstgpt:PATH``) and ``multiturn`` chat.

Parsed here, once, from the ``dataset`` string (:class:`~pytest_sglang.loadgen.shape.spec.LoadSpec` calls
:func:`multiturn_shape` when it is built, so a typo is an error before anything starts). The runners
are :mod:`.replay` (traces) and :mod:`.sessions` (multi-turn).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, fields

from pytest_sglang.errors import ConfigError

#: Dataset kinds replayed on the trace's own clock (open loop), not on ``request_rate``/``concurrency``.
TRACE_KINDS = ("mooncake", "burstgpt")
#: Tokens per Mooncake ``hash_ids`` entry: the trace hashes the prompt in blocks of 512 tokens
#: (Mooncake FAST'25 traces; SGLang's bench_serving builds one text block per hash id too).
MOONCAKE_BLOCK = 512
#: Requests a trace replay keeps in flight at most when ``concurrency`` is not given (each holds a
#: connection); when reached, later requests are sent late and the result says how many.
DEFAULT_TRACE_CAP = 1024
#: Largest ``multiturn`` value for a length (tokens) or a count.
_MAX_MULTITURN = 1_048_576
_MAX_THINK_S = 3600.0
_FORM = "multiturn:sessions=8,turns=4,think_s=0.5,system_len=0,first_len=256,turn_len=64"


@dataclass(frozen=True)
class MultiTurnShape:
    """``multiturn:KEY=VALUE,...``: chat sessions whose context grows with the server's own answers.

    ``sessions`` conversations (default: ``ceil(requests / turns)``) of ``turns`` requests each. A turn
    sends the whole history: the optional system message of ``system_len`` tokens (the same in every
    session), the first user message of ``first_len`` tokens (default: ``input_len``; unique per
    session), then for each earlier turn the server's answer and a new user message of ``turn_len``
    tokens. ``think_s`` seconds pass between an answer and the session's next turn.
    """

    sessions: int | None = None
    turns: int = 4
    think_s: float = 0.0
    system_len: int = 0
    first_len: int | None = None
    turn_len: int = 64

    def session_count(self, requests: int) -> int:
        return self.sessions if self.sessions is not None else math.ceil(requests / self.turns)


def multiturn_shape(dataset: str) -> MultiTurnShape:
    """The shape of a ``multiturn[:KEY=VALUE,...]`` dataset; ConfigError naming the key otherwise."""
    _, _, options = dataset.partition(":")
    values: dict[str, object] = {}
    names = [f.name for f in fields(MultiTurnShape)]
    for item in filter(None, (part.strip() for part in options.split(","))):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            _bad(dataset, f"has no option {key!r}{hint}", f"use the options {', '.join(names)}, e.g. {_FORM}")
        if not sep:
            _bad(dataset, f"option {key!r} has no value", f"write {key}=VALUE, e.g. {_FORM}")
        if key in values:  # which one would win is a guess: refused, not settled silently
            _bad(dataset, f"gives option {key!r} twice ({key}={values[key]:g}, {key}={raw.strip()})",
                 f"give each option once, e.g. {_FORM}")
        values[key] = _number(dataset, key, raw.strip())
    return MultiTurnShape(**values)  # type: ignore[arg-type]


def _number(dataset: str, key: str, raw: str) -> int | float:
    if key == "think_s":
        try:
            seconds = float(raw)
        except ValueError:
            seconds = -1.0
        if not 0.0 <= seconds <= _MAX_THINK_S:
            _bad(dataset, f"think_s={raw!r} is not a number of seconds from 0 to {_MAX_THINK_S:g}",
                 "give the pause between an answer and the next turn, e.g. think_s=0.5")
        return seconds
    low = 0 if key == "system_len" else 1
    try:
        count = int(raw)
    except ValueError:
        count = -1
    if not low <= count <= _MAX_MULTITURN:
        _bad(dataset, f"{key}={raw!r} is not a whole number from {low} to {_MAX_MULTITURN:,}",
             f"give {key} as a whole number, e.g. {_FORM}")
    return count


def _bad(dataset: str, problem: str, fix: str) -> None:
    raise ConfigError("LoadSpec.dataset", dataset, problem, fix)
