"""Accuracy gate: ``@pytest.mark.sglang_accuracy(task=..., min_score=...)`` and :func:`evaluate_accuracy`.

The run is :func:`pytest_sglang.accuracy.evaluate` (SGLang's harness formats, 64 requests in flight);
the verdict uses the sampling error: the gate fails when the upper bound of the score's Wilson
interval is below ``min_score`` (worse than the floor beyond noise; with ``floor_proven=True``, when
the *lower* bound is: the floor must be proven), or when ``baseline`` (an ``eval
--json`` output) shows a drop larger than the interval of the difference allows (``max_drop``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pytest_sglang.accuracy import ROUTES, RUNNERS, TASKS, AccuracyResult, Harness, Runner, evaluate, judge
from pytest_sglang.accuracy.arithmetic import DEFAULT_SEED
from pytest_sglang.accuracy.interval import difference
from pytest_sglang.accuracy.task import MAX_EXAMPLES
from pytest_sglang.accuracy.verdict import JUDGED, floor_bound
from pytest_sglang.errors import ConfigError
from pytest_sglang.files import read_capped
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.keywords import (
    AnyOf,
    AtLeast,
    AtMost,
    CountOrWord,
    Fraction,
    KeywordError,
    OneOf,
    Requires,
    Seconds,
)
from pytest_sglang.gates.registry import GateContext, LockingLoad
from pytest_sglang.loadgen.shape.spec import MAX_IN_FLIGHT, MAX_LEN

if TYPE_CHECKING:
    pass

GATE = "accuracy"
MARKER = "@pytest.mark.sglang_accuracy"
#: ``runner=``: ``builtin`` (this package's harness) or ``sgl-eval`` (SGLang's official client; the plugin judges).
_RUNNERS: dict[str, Runner] = {r: r for r in RUNNERS}
#: Wrong answers shown in a message (the JSON report keeps the engine's few).
SHOWN_WRONG = 3
MAX_BASELINE_BYTES = 16 * 1024 * 1024
# Marker keyword types: the harness's own limits, checked at collection.
Task = Annotated[str, OneOf(TASKS)]
Floor = Annotated[float | None, Fraction()]
Examples = Annotated[int | str, CountOrWord(1, MAX_EXAMPLES, "all")]
Shots = Annotated[int, AtLeast(0), AtMost(100)]
Route = Annotated[str | None, OneOf(tuple(ROUTES))]
Tokens = Annotated[int | None, AtLeast(1), AtMost(MAX_LEN)]
InFlight = Annotated[int, AtLeast(1), AtMost(MAX_IN_FLIGHT)]
Confidence = Annotated[float, AtLeast(0.5), AtMost(0.999)]
RunnerName = Annotated[str, OneOf(RUNNERS)]
_FLOOR_FIX = ("read the wrong answers above: a chat template, tokenizer or rope setting (--chat-template, "
              "--tokenizer-path, --json-model-override-args), --quantization or --dtype change answers; compare "
              "with a known-good launch on the same harness; more num_examples narrow the interval")
_REQUESTS_FIX = "the server failed the requests, not the model: read the first failure and the server log"


def evaluate_accuracy(result: AccuracyResult, *, min_score: float | None = None,
                      baseline: Mapping[str, Any] | None = None, baseline_source: str = "baseline",
                      max_drop: float | None = None, floor_proven: bool = False) -> GateOutcome:
    """Judge an accuracy run against a floor and/or a baseline (an ``eval --json`` document).

    The verdicts are :func:`pytest_sglang.accuracy.judge`'s; each becomes a :class:`Check` naming
    the keyword, and the message gives the score, the counts, the interval and wrong answers.
    """
    given = (("min_score", min_score), ("max_drop", max_drop),
             ("baseline", baseline_source if baseline is not None else None),
             ("floor_proven", floor_proven or None))
    keywords.check(run_marker, "evaluate_accuracy", {k: v for k, v in given if v is not None})
    out = GateOutcome(GATE)
    if result.errors:
        out.add(compare(GATE, "answered_requests", result.total - result.errors, ">=", 1, unit="requests",
                        source=f"{result.errors} of {result.total} failed; first: {result.first_error}",
                        remedy=_REQUESTS_FIX))
    if min_score is not None:
        out.add(_floor_check(result, min_score, floor_proven))
    if baseline is not None:
        out.add(_baseline_check(result, baseline, baseline_source, max_drop or 0.0))
    out.context.update(_context(result))
    out.notes += judge(result, min_score, baseline=baseline, max_drop=max_drop or 0.0, floor_proven=floor_proven)
    return out


def _floor_check(result: AccuracyResult, min_score: float, floor_proven: bool) -> Check:
    """``min_score`` against the bound :func:`~pytest_sglang.accuracy.verdict.floor_bound` names.

    The check's detail carries the score and its interval, so every summary (terminal, JSON, Markdown)
    shows them beside the bound judged, never the bound alone.
    """
    metric, bound = floor_bound(result, floor_proven)
    low, high = result.interval
    return compare(GATE, metric, bound, ">=", min_score, keyword="min_score", remedy=_FLOOR_FIX,
                   detail=f"score {result.score:.3f} ({result.correct}/{result.total} correct), "
                          f"{result.confidence:.0%} Wilson interval [{low:.3f}, {high:.3f}]; judged: "
                          f"{JUDGED[floor_proven]}",
                   source=f"{result.confidence:.0%} Wilson interval [{low:.3f}, {high:.3f}] of the score "
                          f"{result.score:.3f} ({result.correct}/{result.total} correct)")


def _baseline_check(result: AccuracyResult, baseline: Mapping[str, Any], source: str, max_drop: float) -> Check:
    """The drop from the baseline, judged on its interval: its least value must stay within ``max_drop``."""
    # judge() also reports "every request failed": that belongs to the answered_requests check.
    unrelated = judge(result)
    problems = [p for p in judge(result, baseline=baseline, max_drop=max_drop) if p not in unrelated]
    correct, total = baseline.get("correct"), baseline.get("total")
    least: float | None = None
    where = "; ".join(problems)  # why there is no figure (the notes say it too)
    if isinstance(correct, int) and isinstance(total, int) and total > 0:
        change, low, high = difference((result.correct, result.total), (correct, total), result.confidence)
        least = -high
        where = (f"{result.confidence:.0%} Newcombe interval of the change {change:+.3f}: [{low:+.3f}, {high:+.3f}] "
                 f"against {source} ({correct}/{total} correct)")
    return Check(gate=GATE, metric="score_drop_lower_bound", measured=least, required=max_drop, op="<=",
                 source=where, passed=not problems, keyword="max_drop",
                 remedy="compare the wrong answers with the baseline's; measure both with the same harness")


def _context(result: AccuracyResult) -> dict[str, str]:
    context = {"result": result.summary(),
               "harness": ", ".join(f"{k}={v}" for k, v in result.harness.items()),
               "time": f"{result.total} examples in {result.elapsed_s:.1f} s"}
    if result.wrong:
        context["wrong answers"] = "; ".join(
            f"#{w.get('index')}: expected {w.get('target')}, extracted {w.get('extracted')!r} from "
            f"{_short(str(w.get('output', '')))}" for w in result.wrong[:SHOWN_WRONG])
    return context


def _short(text: str, limit: int = 80) -> str:
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 4] + "...'"


def read_baseline(path: str, call: str = MARKER) -> dict[str, Any]:
    """An ``eval --json`` output to compare with; a bad file is a :class:`KeywordError` naming ``baseline``."""
    fix = "pass a file written by: python -m pytest_sglang eval --json OUT"
    try:
        doc = json.loads(read_capped(path, option="baseline", cap=MAX_BASELINE_BYTES, fix=fix, too_large_fix=fix))
    except ConfigError as exc:
        raise KeywordError(call, {"baseline": path}, exc.problem, exc.fix) from None
    except ValueError as exc:
        raise KeywordError(call, {"baseline": path}, f"cannot be read as JSON ({exc})", fix) from None
    if not isinstance(doc, dict) or "harness" not in doc:
        raise KeywordError(call, {"baseline": path}, "is not an eval --json result",
                           "pass a file written by: python -m pytest_sglang eval --json OUT")
    return doc


# ---- the marker ------------------------------------------------------------------------------------
Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class _RunView:
    eval_data: str | None = None
    progress: Progress | None = None


def _run_view(ctx: GateContext) -> _RunView:
    """``--sglang-eval-data`` and a terminal progress line, from the run (neither outside pytest)."""
    return _RunView(ctx.eval_data, _progress(ctx.write) if ctx.write is not None else None)


def _progress(write: Callable[[str], None]) -> Progress:
    """``sglang accuracy: 120/200 examples, 0.74 correct so far, 3.1 s`` about once a second."""
    started = last = time.monotonic()

    def show(done: int, total: int, correct: int) -> None:
        nonlocal last
        now = time.monotonic()
        if done < total and now - last < 1.0:
            return
        last = now
        write(f"sglang accuracy: {done}/{total} examples, {correct / max(done, 1):.2f} correct so far, "
              f"{now - started:.1f} s")

    return show


def _harness(view: _RunView, data: str | None, **fields: Any) -> Harness:
    """The harness of a marker: ``data`` wins over ``--sglang-eval-data``; neither: the hub (gsm8k, mmlu)."""
    path = data if data is not None else view.eval_data
    try:
        return Harness(data=Path(path) if path is not None else None, **fields)
    except ConfigError as exc:  # the engine's field names are the marker's keywords
        raise KeywordError(MARKER, {exc.source: exc.value}, exc.problem, exc.fix) from None


@keywords.rules(
    AnyOf(("min_score", "baseline")),
    Requires("max_drop", needs=("baseline",), why="the drop is measured from a baseline",
             fix="add baseline='last-release.json' (written by python -m pytest_sglang eval --json)"),
    Requires("floor_proven", needs=("min_score",), why="it says how min_score is judged",
             fix="add min_score=0.74 (the floor the interval's lower bound must reach)"),
)
def run_marker(
    ctx: GateContext, *, task: Task, min_score: Floor = None, num_examples: Examples = 200, shots: Shots = 5,
    route: Route = None, max_tokens: Tokens = None, temperature: Annotated[float, AtLeast(0)] = 0.0,
    concurrency: InFlight = 64, request_timeout_s: Seconds = 300.0,
    seed: Annotated[int, AtLeast(0)] = DEFAULT_SEED, confidence: Confidence = 0.95, data: str | None = None,
    baseline: str | None = None, max_drop: Floor = None, runner: RunnerName = "builtin", sgl_eval: str | None = None,
    floor_proven: bool = False,
) -> GateOutcome:
    """``@pytest.mark.sglang_accuracy``: run the task against the server and judge the score.

    This signature declares the marker's keywords (types, defaults, ranges): the plugin validates a
    marker against it at collection and shows it in ``pytest --markers``.
    """
    view = _run_view(ctx)
    harness = _harness(view, data, task=task, num_examples=num_examples, shots=shots, route=route,
                       max_tokens=max_tokens, temperature=temperature, concurrency=concurrency,
                       request_timeout_s=request_timeout_s, seed=seed, confidence=confidence)
    doc = read_baseline(baseline) if baseline is not None else None
    # The run-wide load lock: 64 requests in flight must not overlap a throughput measurement.
    lock = ctx.load.lock() if isinstance(ctx.load, LockingLoad) else contextlib.nullcontext()
    try:
        with lock:
            result = evaluate(ctx.server.server_url, harness, api_key=ctx.server.api_key, progress=view.progress,
                              runner=_RUNNERS[runner], sgl_eval=sgl_eval)
    except ConfigError as exc:  # the engine names its own fields (runner, sgl_eval): the marker's keywords
        if exc.source in ("runner", "sgl_eval"):
            raise KeywordError(MARKER, {exc.source: exc.value}, exc.problem, exc.fix) from None
        raise
    return evaluate_accuracy(result, min_score=min_score, baseline=doc, baseline_source=baseline or "",
                             max_drop=max_drop, floor_proven=floor_proven)
