"""sgl-eval's files: the dataset it is given, and the metrics and predictions it writes back.

What sgl-eval 0.1.3 reads and writes (seen on real runs, and in its ``evals/_loader.py``,
``metrics.py`` and ``predictions.py``):

- ``--from-dataset FILE``: JSON lines ``{"id", "problem", "expected_answer"}`` (NeMo-Skills' shape);
  a multiple-choice ``problem`` carries its options as ``A) ...`` lines (NeMo-Skills' ``get_mcq_fields``).
- ``<out-dir>/sgl_eval_<benchmark>_<stamp>/metrics.json``: ``aggregate.score`` in [0, 1],
  ``num_examples``, ``gen`` (the sampling sent), ``sgl_eval_version``, ``ns_commit_sha``, ``model``,
  and ``partial`` / ``planned_examples`` / ``completed_samples`` after a Ctrl-C.
- ``output-rs0.jsonl`` beside it, one line per answered example: ``id``, ``generation``,
  ``expected_answer``, ``predicted_answer`` (None: nothing extracted), ``symbolic_correct``,
  ``finish_reason`` (``"error"`` when the request failed after its retries).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_sglang.accuracy.mmlu import LETTERS
from pytest_sglang.accuracy.task import Example, Task
from pytest_sglang.accuracy.verdict import Outcome

PREDICTIONS = "output-rs0.jsonl"  # repeat 0: the runner always asks for --n-repeats 1
#: Bytes of metrics.json read at most (it embeds a --prompt yaml; a few kB without one).
MAX_METRICS_BYTES = 8 * 1024 * 1024
#: Bytes of one prediction line read at most (the generation of one example).
MAX_LINE_BYTES = 4 * 1024 * 1024
#: Characters of a model output kept per wrong example (as the built-in runner).
KEEP_CHARS = 600
GRADERS = {"gsm8k": "sgl-eval math grader (\\boxed{}, math_verify)", "mmlu": "sgl-eval multiple-choice grader"}


def _id(index: int) -> str:
    return f"ex-{index}"


def problem(task: Task, example: Example) -> str:
    """The ``problem`` text sgl-eval wraps in its prompt: the question, with ``A) ...`` options for mmlu."""
    if task.name != "mmlu":
        return example.question
    options = "\n".join(f"{letter}) {text}" for letter, text in zip(LETTERS, example.choices, strict=True))
    return f"{example.question.strip()}\n\n{options}"


def write_dataset(task: Task, path: Path) -> None:
    """The task's examples in sgl-eval's ``--from-dataset`` shape, ids ``ex-<index>``."""
    with path.open("w", encoding="utf-8") as fh:
        for i, example in enumerate(task.examples):
            fh.write(json.dumps({"id": _id(i), "problem": problem(task, example),
                                 "expected_answer": example.target}) + "\n")


def run_dir(out_dir: Path) -> Path | None:
    """The one ``sgl_eval_*`` folder sgl-eval made in ``out_dir``, or None (yet)."""
    found = sorted(p for p in out_dir.glob("sgl_eval_*") if p.is_dir())
    return found[-1] if found else None


def read_metrics(path: Path) -> dict[str, Any] | None:
    """``metrics.json`` as a dict; None when missing or not a JSON object."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_METRICS_BYTES + 1)
        doc = json.loads(raw) if len(raw) <= MAX_METRICS_BYTES else None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _lines(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON object line of ``path``; an over-long or broken line is skipped, not fatal."""
    rows: list[dict[str, Any]] = []
    with path.open("rb") as fh:
        while line := fh.readline(MAX_LINE_BYTES):
            if not line.endswith(b"\n"):
                if len(line) >= MAX_LINE_BYTES:  # skip the rest of an over-long line
                    while (more := fh.readline(MAX_LINE_BYTES)) and not more.endswith(b"\n"):
                        pass
                continue  # a last line still being written
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def _outcome(row: dict[str, Any]) -> Outcome | None:
    ident = row.get("id")
    if not isinstance(ident, str) or not ident.startswith("ex-") or not ident[3:].isdigit():
        return None
    failed = row.get("finish_reason") == "error"
    predicted = row.get("predicted_answer")
    generation = row.get("generation")
    return Outcome(index=int(ident[3:]), correct=row.get("symbolic_correct") is True and not failed,
                   target=str(row.get("expected_answer", "")),
                   extracted=None if predicted is None else str(predicted),
                   output=(generation if isinstance(generation, str) else "")[:KEEP_CHARS],
                   error="the request failed (sgl-eval finish_reason=error, after its retries; see its log)"
                   if failed else None)


def read_outcomes(path: Path) -> list[Outcome]:
    """The scored examples of a predictions file, in example order."""
    outcomes = [o for o in map(_outcome, _lines(path)) if o is not None] if path.exists() else []
    return sorted(outcomes, key=lambda o: o.index)


class Tail:
    """Counts predictions as sgl-eval appends them, for live progress (reads only what is new)."""

    def __init__(self, out_dir: Path, total: int, progress: Callable[[int, int, int], None]) -> None:
        self.out_dir, self.total, self.progress = out_dir, total, progress
        self.path: Path | None = None
        self.offset = 0
        self.done = self.correct = 0
        self.partial = b""

    def poll(self) -> None:
        if self.path is None:
            found = run_dir(self.out_dir)
            self.path = found / PREDICTIONS if found is not None else None
        if self.path is None or not self.path.exists():
            return
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(MAX_LINE_BYTES)
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        self.partial = self.partial[-MAX_LINE_BYTES:]
        before = self.done
        for line in lines:
            self.done += 1
            self.correct += b'"symbolic_correct": true' in line  # cheap: the line is scored fully later
        if self.done != before:
            self.progress(min(self.done, self.total), self.total, self.correct)


def fingerprint(task: Task, benchmark: str, metrics: dict[str, Any], extra_args: Sequence[str]) -> dict[str, Any]:
    """What changes an sgl-eval score: its version, vendored graders, prompt and the sampling it sent."""
    raw = metrics.get("gen")
    gen: dict[str, Any] = raw if isinstance(raw, dict) else {}
    prompt = metrics.get("prompt")
    template = f"sgl-eval:{benchmark}"
    if isinstance(prompt, dict):  # --prompt: another question, so another harness
        digest = hashlib.sha256(str(prompt.get("yaml", "")).encode()).hexdigest()[:12]
        template += f" prompt={Path(str(prompt.get('spec'))).name} sha256:{digest}"
    return {"runner": "sgl-eval", "sgl_eval_version": metrics.get("sgl_eval_version"),
            "ns_commit_sha": metrics.get("ns_commit_sha"), "benchmark": benchmark, "task": task.name,
            "template": template, "shots": 0, "route": "chat", "max_tokens": gen.get("max_tokens"),
            "temperature": gen.get("temperature"), "top_p": gen.get("top_p"), "seed": gen.get("seed"),
            "chat_template_kwargs": gen.get("chat_template_kwargs"), "source": task.source,
            "num_examples": len(task.examples), "extraction": GRADERS[benchmark], "extra_args": _portable(extra_args)}


def _portable(args: Sequence[str]) -> list[str]:
    """``args`` with a ``--prompt`` file reduced to its name.

    The template's digest identifies the file, and a baseline recorded on another machine (another
    path) must still compare.
    """
    out: list[str] = []
    for arg in args:
        if out and out[-1] == "--prompt":
            arg = Path(arg).name
        elif arg.startswith("--prompt="):
            arg = "--prompt=" + Path(arg.split("=", 1)[1]).name
        out.append(arg)
    return out

