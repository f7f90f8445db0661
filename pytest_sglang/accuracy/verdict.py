"""The verdict of an accuracy run: the score with its binomial confidence interval, against a floor.

The gate fails when the interval's *upper* bound is below ``min_score``: the server is then worse
than the floor beyond sampling error. Against a baseline it fails when the whole interval of the
difference (Newcombe's, from two Wilson intervals) lies below ``-max_drop``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_sglang.accuracy.interval import difference, wilson
from pytest_sglang.errors import SGLangError

#: Wrong examples kept for the message and the JSON (enough to see a pattern).
SHOWN_WRONG = 5
INTERVAL_METHOD = "Wilson score"


class EvalRunError(SGLangError):
    """The run gave no verdict: sgl-eval crashed or wrote no result, or the run passed its deadline.

    ``log_path`` is the runner's log (kept for reading); ``partial`` the examples scored before it
    stopped, when there were any (never judged: a partial run is not a sample of the task).
    """

    def __init__(self, message: str, *, fix: str, log_path: Path | None = None,
                 partial: AccuracyResult | None = None) -> None:
        """Keep the parts; the message ends with the ``Fix:`` line."""
        self.fix, self.log_path, self.partial = fix, log_path, partial
        super().__init__(f"{message}\nFix: {fix}")


@dataclass(frozen=True)
class Outcome:
    """One scored example: ``error`` set when the request got no usable answer (then not ``correct``)."""

    index: int
    correct: bool
    target: str
    extracted: str | None
    output: str
    error: str | None = None


@dataclass
class AccuracyResult:
    task: str
    correct: int
    total: int
    invalid: int  # answers in which no answer could be found (e.g. no number at all)
    errors: int  # requests that got no usable answer (HTTP error, timeout)
    harness: dict[str, Any]
    elapsed_s: float
    confidence: float
    first_error: str | None = None
    wrong: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_outcomes(cls, task: str, outcomes: Sequence[Outcome], harness: Mapping[str, Any], elapsed_s: float,
                      confidence: float) -> AccuracyResult:
        errors = [o for o in outcomes if o.error is not None]
        wrong = [o for o in outcomes if not o.correct and o.error is None][:SHOWN_WRONG]
        return cls(task=task, correct=sum(o.correct for o in outcomes), total=len(outcomes),
                   invalid=sum(o.extracted is None and o.error is None for o in outcomes), errors=len(errors),
                   harness=dict(harness), elapsed_s=elapsed_s, confidence=confidence,
                   first_error=errors[0].error if errors else None,
                   wrong=[{"index": o.index, "target": o.target, "extracted": o.extracted, "output": o.output}
                          for o in wrong])

    @property
    def score(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.correct, self.total, self.confidence)

    def summary(self) -> str:
        low, high = self.interval
        text = (f"{self.task}: score {self.score:.3f} ({self.correct}/{self.total} correct, {self.invalid} without an "
                f"answer, {self.errors} failed requests), {self.confidence:.0%} {INTERVAL_METHOD} interval "
                f"[{low:.3f}, {high:.3f}]")
        return text + (f"; first failed request: {self.first_error}" if self.first_error else "")

    def to_json(self) -> dict[str, Any]:
        low, high = self.interval
        return {"task": self.task, "score": self.score, "correct": self.correct, "total": self.total,
                "invalid": self.invalid, "errors": self.errors, "first_error": self.first_error,
                "interval": {"method": INTERVAL_METHOD, "confidence": self.confidence, "low": low, "high": high},
                "harness": self.harness, "elapsed_s": self.elapsed_s, "wrong_examples": self.wrong}


def judge(result: AccuracyResult, min_score: float | None = None, *, baseline: Mapping[str, Any] | None = None,
          max_drop: float = 0.0) -> list[str]:
    """The reasons the run fails its floor or its baseline (empty: it passes)."""
    problems: list[str] = []
    high = result.interval[1]
    if result.total and result.errors == result.total:
        problems.append(f"every request failed ({result.first_error}): this measures the server, not the model")
    if min_score is not None and high < min_score:
        problems.append(f"min_score={min_score:g} is above the interval's upper bound {high:.3f}: the score "
                        f"{result.score:.3f} is below the floor beyond sampling error")
    if baseline is not None:
        problems += _against(result, baseline, max_drop)
    return problems


def _against(result: AccuracyResult, baseline: Mapping[str, Any], max_drop: float) -> list[str]:
    raw = baseline.get("harness")
    theirs: dict[str, Any] = raw if isinstance(raw, dict) else {}
    differs = sorted(k for k in set(result.harness) | set(theirs)
                     if k != "num_examples" and result.harness.get(k) != theirs.get(k))
    if differs:
        shown = ", ".join(f"{k}: {theirs.get(k)!r} -> {result.harness.get(k)!r}" for k in differs)
        return [f"the baseline was measured with another harness ({shown}); compare like with like"]
    correct, total = baseline.get("correct"), baseline.get("total")
    if not isinstance(correct, int) or not isinstance(total, int) or total <= 0:
        return ["the baseline has no correct/total counts"]
    d, low, high = difference((result.correct, result.total), (correct, total), result.confidence)
    if high < -max_drop:
        return [f"the score dropped by {-d:.3f} from the baseline's {correct / total:.3f} ({correct}/{total}); "
                f"the {result.confidence:.0%} interval of the change [{low:+.3f}, {high:+.3f}] lies below "
                f"-max_drop={-max_drop:g}"]
    return []
