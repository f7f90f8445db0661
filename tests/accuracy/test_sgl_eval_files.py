"""Reading sgl-eval's files: predictions as they are appended (progress), broken or over-long lines, ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang.accuracy import Harness, sgl_eval_io


def _pred(i: int, correct: bool, predicted: str | None = "7", finish: str = "stop") -> str:
    return json.dumps({"generation": f"answer {i}", "id": f"ex-{i}", "expected_answer": "7",
                       "predicted_answer": predicted, "symbolic_correct": correct, "finish_reason": finish}) + "\n"


def test_outcomes_count_failures_and_missing_answers_apart(tmp_path: Path) -> None:
    path = tmp_path / "output-rs0.jsonl"
    path.write_text(_pred(2, True) + _pred(0, False, None) + "not json\n" + _pred(1, False, None, "error")
                    + json.dumps({"id": "custom-3"}) + "\n" + '{"id": "ex-9", "partial line')
    outcomes = sgl_eval_io.read_outcomes(path)
    assert [(o.index, o.correct, o.extracted, o.error is not None) for o in outcomes] == [
        (0, False, None, False), (1, False, None, True), (2, True, "7", False)]


def test_an_over_long_line_is_skipped_not_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sgl_eval_io, "MAX_LINE_BYTES", 64)
    path = tmp_path / "output-rs0.jsonl"
    path.write_text(json.dumps({"id": "ex-0", "generation": "x" * 500}) + '\n{"id": "ex-1"}\n')
    assert sgl_eval_io._lines(path) == [{"id": "ex-1"}]


def test_progress_follows_the_predictions_as_they_are_written(tmp_path: Path) -> None:
    seen: list[tuple[int, int, int]] = []
    tail = sgl_eval_io.Tail(tmp_path, 3, lambda *a: seen.append(a))
    tail.poll()  # no run folder yet
    run = tmp_path / "sgl_eval_gsm8k_20260101-000000"
    run.mkdir()
    with (run / "output-rs0.jsonl").open("w") as fh:
        fh.write(_pred(0, True) + _pred(1, False)[:20])
        fh.flush()
        tail.poll()
        fh.write(_pred(1, False)[20:] + _pred(2, True))
    tail.poll()
    assert seen == [(1, 3, 1), (3, 3, 2)]


def test_the_dataset_handed_to_sgl_eval_is_the_plugins_examples(tmp_path: Path) -> None:
    task = Harness(task="arithmetic", num_examples=3, shots=0).load()
    sgl_eval_io.write_dataset(task, tmp_path / "d.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert rows == [{"id": f"ex-{i}", "problem": e.question, "expected_answer": e.target}
                    for i, e in enumerate(task.examples)]
