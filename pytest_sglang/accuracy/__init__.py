"""Accuracy floors judged with their sampling error, usable without pytest.

``evaluate(url, Harness(task="gsm8k", data=Path("test.jsonl")))`` runs a task the way SGLang's own
harnesses do (prompt format, few-shot rows, answer extraction, route) at 64 requests in flight and
returns an :class:`AccuracyResult` with the score and its Wilson interval; :func:`judge` says why it
fails a floor (``min_score``) or a baseline.
"""

from __future__ import annotations

from pytest_sglang.accuracy.harness import ROUTES, TASKS, Harness
from pytest_sglang.accuracy.interval import wilson
from pytest_sglang.accuracy.runner import evaluate
from pytest_sglang.accuracy.verdict import AccuracyResult, judge

__all__ = ["ROUTES", "TASKS", "AccuracyResult", "Harness", "evaluate", "judge", "wilson"]
