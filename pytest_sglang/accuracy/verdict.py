"""The verdict of an accuracy run: the score with its binomial confidence interval, against a floor.

The gate fails when the interval's *upper* bound is below ``min_score``: the server is then worse
than the floor beyond sampling error. Against a baseline it fails when the whole interval of the
difference (Newcombe's, from two Wilson intervals) lies below ``-max_drop``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
class Tally:
    """The counts of a run as outcomes arrive: memory flat in the number of examples.

    Only what the result shows is kept (counts, the first failure, the first wrong answers), so a
    100,000-example run holds the same as a 1,000-example one.
    """

    correct: int = 0
    total: int = 0
    invalid: int = 0
    errors: int = 0
    first_error: str | None = None
    first_error_index: int = -1
    wrong: list[Outcome] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.total += 1
        self.correct += o.correct
        if o.error is not None:
            self.errors += 1
            if self.first_error is None or o.index < self.first_error_index:  # the lowest index, as listed
                self.first_error, self.first_error_index = o.error, o.index
        elif not o.correct:
            self.invalid += o.extracted is None
            if len(self.wrong) < SHOWN_WRONG:
                self.wrong.append(o)

    def result(self, task: str, harness: Mapping[str, Any], elapsed_s: float, confidence: float) -> AccuracyResult:
        wrong = sorted(self.wrong, key=lambda o: o.index)  # done order varies; show the first by index
        return AccuracyResult(task=task, correct=self.correct, total=self.total, invalid=self.invalid,
                              errors=self.errors, harness=dict(harness), elapsed_s=elapsed_s, confidence=confidence,
                              first_error=self.first_error,
                              wrong=[{"index": o.index, "target": o.target, "extracted": o.extracted,
                                      "output": o.output} for o in wrong])


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
    def from_outcomes(cls, task: str, outcomes: Iterable[Outcome], harness: Mapping[str, Any], elapsed_s: float,
                      confidence: float) -> AccuracyResult:
        tally = Tally()
        for outcome in outcomes:
            tally.add(outcome)
        return tally.result(task, harness, elapsed_s, confidence)

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


#: How ``min_score`` is judged, by ``floor_proven``: the metric name and what it means.
JUDGED = {False: "the interval's upper bound >= min_score (fails only when the score is below the floor "
                 "beyond sampling error)",
          True: "the interval's lower bound >= min_score (floor_proven: passes only when the score is "
                "above the floor beyond sampling error)"}


def floor_bound(result: AccuracyResult, floor_proven: bool = False) -> tuple[str, float]:
    """``("score_upper_bound", high)``, or with ``floor_proven`` ``("score_lower_bound", low)``."""
    low, high = result.interval
    return ("score_lower_bound", low) if floor_proven else ("score_upper_bound", high)


def judge(result: AccuracyResult, min_score: float | None = None, *, baseline: Mapping[str, Any] | None = None,
          max_drop: float = 0.0, floor_proven: bool = False) -> list[str]:
    """The reasons the run fails its floor or its baseline (empty: it passes).

    The floor is judged on the interval's upper bound by default (a score is refused only when it is
    below the floor beyond sampling error: no false red on a healthy server); ``floor_proven=True``
    judges the lower bound (the score must be above the floor beyond sampling error: the stricter
    reading, which needs enough examples for the interval to clear the floor).
    """
    problems: list[str] = []
    low, high = result.interval
    if result.total and result.errors == result.total:
        problems.append(f"every request failed ({result.first_error}): this measures the server, not the model")
    if min_score is not None and not floor_proven and high < min_score:
        problems.append(f"min_score={min_score:g} is above the interval's upper bound {high:.3f}: the score "
                        f"{result.score:.3f} is below the floor beyond sampling error")
    if min_score is not None and floor_proven and low < min_score:
        problems.append(f"min_score={min_score:g} is above the interval's lower bound {low:.3f} (floor_proven): "
                        f"the score {result.score:.3f} is not above the floor beyond sampling error "
                        f"({result.correct}/{result.total} correct; more examples narrow the interval)")
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
