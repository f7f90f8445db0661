"""Accuracy floors judged with their sampling error, usable without pytest.

``evaluate(url, Harness(task="gsm8k", data=Path("test.jsonl")))`` runs a task the way SGLang's own
harnesses do (prompt format, few-shot rows, answer extraction, route) at 64 requests in flight and
returns an :class:`AccuracyResult` with the score and its Wilson interval; :func:`judge` says why it
fails a floor (``min_score``) or a baseline. ``runner="sgl-eval"`` has SGLang's official client ask
the questions instead; gsm8k and mmlu without ``data`` come from the Hugging Face hub.
"""

from __future__ import annotations

from pytest_sglang.accuracy.harness import ROUTES, TASKS, Harness
from pytest_sglang.accuracy.hub import DataUnavailable
from pytest_sglang.accuracy.interval import wilson
from pytest_sglang.accuracy.runner import evaluate
from pytest_sglang.accuracy.sgl_eval import RUNNERS, Runner
from pytest_sglang.accuracy.verdict import AccuracyResult, EvalRunError, judge

__all__ = ["ROUTES", "RUNNERS", "TASKS", "AccuracyResult", "DataUnavailable", "EvalRunError", "Harness", "Runner",
           "evaluate", "judge", "wilson"]
