"""Golden-output gate: ``@pytest.mark.sglang_golden(path=...)``, and the judge of the ``--sglang-golden`` test.

Compares the server with a recording of a known-good one (``python -m pytest_sglang golden record``,
engine :mod:`pytest_sglang.correctness.golden`): the greedy token ids of the recorded prompts must
match on at least ``min_match`` of them, and where the tokens agree a logprob may differ by at most
``max_logprob_delta``. The message gives the exact-match rate, the first divergence (prompt, position,
both continuations) and the largest logprob difference, against the limits. Where the recorded server
differs from this one (SGLang version, model, dtype, ... of :mod:`.comparable` the recording kept), the
differences are named: replaying a recording on a new version is what the gate is for, so they do not
fail it, but a mismatch is read knowing them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pytest_sglang.correctness import golden
from pytest_sglang.correctness.payload import as_dict
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.gates.keywords import Always, AtLeast, Fraction, KeywordError, Seconds, rules
from pytest_sglang.gates.load.comparable import FIELDS, differences
from pytest_sglang.gates.registry import GateContext, LockingLoad

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle

GATE = "golden"
MARKER = "@pytest.mark.sglang_golden"
DEFAULT_TIMEOUT_S = 120.0
_MATCH_FIX = ("the server answers differently from the recording: compare its launch args and version with the "
              "recorded server (dtype, quantization, attention backend, tp); exact matching needs "
              "--enable-deterministic-inference on both sides, otherwise lower the match floor")
_DELTA_FIX = "numerics changed where the tokens still agree: compare dtype, kernels and the cache settings"


def load_golden(path: str) -> dict[str, Any]:
    """A recording with at least one prompt; a bad file is the engine's :class:`ConfigError`."""
    doc = golden.load(Path(path))
    if not doc["records"]:
        raise ConfigError("golden file", path, "holds no prompts",
                          "record one with: python -m pytest_sglang golden record --url URL --out FILE")
    return doc


def evaluate_golden(server: Handle, doc: Mapping[str, Any], *, source: str, min_match: float = 1.0,
                    max_logprob_delta: float | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                    names: tuple[str, str] = ("min_match", "max_logprob_delta")) -> GateOutcome:
    """Re-run the recorded prompts one at a time and judge the answers against the limits.

    ``names`` are how the limits are written where they were set (marker keywords, or the
    ``--sglang-golden-*`` options), so the message names what the user wrote.
    """
    with server.client() as client:
        found = golden.measure(client, dict(doc), timeout_s=timeout_s)
    out = judge_golden(found, doc, source=source, min_match=min_match, max_logprob_delta=max_logprob_delta,
                       names=names)
    recorded = as_dict(doc.get("server"))
    kept = [f for f in FIELDS if f in recorded]
    if kept:  # a recording made by ``golden record`` keeps its server's facts
        found_differences = differences(server.info(), recorded, kept)
        out.context["recording"] += ("; this server differs: " + "; ".join(
            f"{f} {b} recorded, {a} here" for f, a, b in found_differences) if found_differences
            else f"; this server runs the same {', '.join(kept)}")
    return out


def judge_golden(found: golden.Comparison, doc: Mapping[str, Any], *, source: str, min_match: float,
                 max_logprob_delta: float | None, names: tuple[str, str]) -> GateOutcome:
    """The outcome of a comparison against the user's limits."""
    prompts, same, rate, delta = found.prompts, found.same, found.rate, found.max_delta
    worst = f"prompt {found.worst_at[0]}, token {found.worst_at[1]}" if found.worst_at else None
    out = GateOutcome(GATE)
    out.add(compare(GATE, "match_rate", rate, ">=", min_match, keyword=names[0], remedy=_MATCH_FIX,
                    source=f"{same}/{prompts} prompts give the recorded token ids"))
    if max_logprob_delta is not None:
        out.add(compare(GATE, "max_logprob_delta", delta, "<=", max_logprob_delta, keyword=names[1],
                        source="the largest logprob difference where the tokens agree", remedy=_DELTA_FIX))
    out.context["recording"] = _recording(doc, source, prompts)
    out.context["first divergence"] = found.first_text() or "none: every prompt gives the recorded token ids"
    limit = (f"limit {names[1]}={max_logprob_delta:g}" if max_logprob_delta is not None
             else f"not limited: set {names[1]}")
    out.context["largest logprob delta"] = f"{delta:.4g}{f' ({worst})' if worst else ''}; {limit}"
    out.notes += list(found.failures)
    return out


def _recording(doc: Mapping[str, Any], source: str, prompts: int) -> str:
    server = as_dict(doc.get("server"))
    origin = ", ".join(f"{k} {server[k]}" for k in ("model_path", "version") if k in server)
    return f"{source}: {prompts} prompts x {doc.get('tokens')} greedy tokens" + (f", from {origin}" if origin else "")


@rules(Always("the recorded prompts are answered again and their match_rate is measured (min_match=0 accepts any "
              "rate, not a failed answer)"))
def run_marker(
    ctx: GateContext, *, path: str, min_match: Annotated[float, Fraction()] = 1.0,
    max_logprob_delta: Annotated[float | None, AtLeast(0)] = None, request_timeout_s: Seconds = DEFAULT_TIMEOUT_S,
) -> GateOutcome:
    """``@pytest.mark.sglang_golden``: compare the server with the recording at ``path``.

    This signature declares the marker's keywords (types, defaults, ranges): the plugin validates a
    marker against it at collection and shows it in ``pytest --markers``.
    """
    try:
        doc = load_golden(path)
    except ConfigError as exc:
        raise KeywordError(MARKER, {"path": path}, exc.problem, exc.fix) from None
    # Batch size 1 on both sides: no other load of the run may share the server's batch meanwhile.
    lock = ctx.load.lock() if isinstance(ctx.load, LockingLoad) else contextlib.nullcontext()
    with lock:
        return evaluate_golden(ctx.server, doc, source=path, min_match=min_match,
                               max_logprob_delta=max_logprob_delta, timeout_s=request_timeout_s)
