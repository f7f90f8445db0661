r"""``runner="sgl-eval"``: SGLang's official accuracy client asks the questions, the plugin judges.

sgl-eval (PyPI ``sgl-eval``, tested with 0.1.3) sends each example to ``/v1/chat/completions`` with
NeMo-Skills' prompt and grades it with NeMo-Skills' grader (``\boxed{}`` + math_verify for gsm8k,
the multiple-choice grader for mmlu). It never fails on a score (a preset's ``expected.score`` is
"informational only"), so the verdict stays the plugin's: its predictions are read back into an
:class:`~pytest_sglang.accuracy.verdict.AccuracyResult` and judged with the Wilson interval.

How it runs:

- The examples are the plugin's (a local file, the hub, or the generated arithmetic), handed over
  with ``--from-dataset``: sgl-eval needs no network of its own and scores the same questions as
  the built-in harness. Benchmark ``gsm8k`` (math grader) for gsm8k and arithmetic, ``mmlu`` for mmlu.
  Zero-shot, as sgl-eval asks; ``--n-repeats 1``, so the score is a binomial proportion.
- One subprocess in its own session, its output in a log file (never a pipe), one deadline. On the
  deadline or Ctrl-C it gets SIGINT first (sgl-eval then aborts its requests and writes partial
  metrics, exit 130), and after :data:`GRACE_S` its whole process tree is killed, with every process
  that carries the run's mark in its environment (a descendant that left the group).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

import httpx

from pytest_sglang import redaction
from pytest_sglang.accuracy import sgl_eval_io as io
from pytest_sglang.accuracy.harness import Harness
from pytest_sglang.accuracy.task import Task
from pytest_sglang.accuracy.verdict import AccuracyResult, EvalRunError
from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.server.client import make_client
from pytest_sglang.server.phases import log_tail
from pytest_sglang.server.runner import LAUNCH_ENV, OWNER_ENV, kill_marked, owner_marker
from pytest_sglang.server.url import ServerURL

Runner = Literal["builtin", "sgl-eval"]
RUNNERS: tuple[Runner, ...] = ("builtin", "sgl-eval")
EXECUTABLE = "sgl-eval"
TESTED_VERSION = "0.1.3"
INSTALL = (f"install it in a venv of its own (python -m venv ~/sgl-eval && ~/sgl-eval/bin/pip install "
           f"sgl-eval=={TESTED_VERSION}) and pass its path (sgl_eval=~/sgl-eval/bin/sgl-eval; "
           "eval --sgl-eval PATH), put it on PATH, or use runner='builtin'")
BENCHMARKS = {"arithmetic": "gsm8k", "gsm8k": "gsm8k", "mmlu": "mmlu"}
#: sgl-eval flags the runner sets from the harness; ``sgl_eval_args`` may not name them (nor abbreviate
#: them: sgl-eval's argparse accepts any unique prefix, so ``--num-ex`` is ``--num-examples``).
OWNED = ("--base-url", "--api-key", "--num-examples", "--num-threads", "--n-repeats", "--max-tokens",
         "--temperature", "--out-dir", "--no-dump-predictions", "--from-dataset", "--preset", "--help")
#: Seconds sgl-eval gets after SIGINT to write its partial metrics before its tree is killed.
GRACE_S = 10.0
POLL_S = 0.2


def locate(path: str | Path | None = None) -> Path:
    """The sgl-eval executable: ``path`` if given, else ``sgl-eval`` on PATH or beside this Python."""
    if path is not None:
        exe = Path(path).expanduser()
        if not exe.is_file() or not os.access(exe, os.X_OK):
            raise ConfigError("sgl_eval", str(path), "is not an executable file", INSTALL)
        return exe
    # Beside sys.executable too: `pip install sgl-eval` into an inactive venv puts it there.
    search = os.pathsep.join([os.environ.get("PATH", ""), str(Path(sys.executable).parent)])
    found = shutil.which(EXECUTABLE, path=search)
    if found is None:
        raise ConfigError("runner", "sgl-eval", "needs the sgl-eval executable, which is not on PATH", INSTALL)
    return Path(found)


def check_args(args: Sequence[str]) -> tuple[str, ...]:
    """``sgl_eval_args`` as given, refused when one sets what the harness owns."""
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise ConfigError("sgl_eval_args", args, "must be a list of strings",
                          "pass e.g. ['--prompt', 'my.yaml', '--seed', '0']")
    for arg in args:
        name = arg.split("=", 1)[0]
        if name.startswith("--") and len(name) > 2 and any(flag.startswith(name) for flag in OWNED):
            raise ConfigError("sgl_eval_args", list(args), f"{name} sets what the harness owns ({', '.join(OWNED)})",
                              "set it through the harness (num_examples, concurrency, temperature, max_tokens) "
                              "or drop it")
    return tuple(args)


def default_timeout(harness: Harness, examples: int) -> float:
    """Every round of ``concurrency`` requests may take ``request_timeout_s``, plus two minutes of start-up."""
    return harness.request_timeout_s * max(1, math.ceil(examples / harness.concurrency)) + 120.0


def run(url: ServerURL, harness: Harness, *, api_key: str | None = None,
        progress: Callable[[int, int, int], None] | None = None, executable: str | Path | None = None,
        args: Sequence[str] = (), timeout_s: float | None = None, work_dir: Path | None = None) -> AccuracyResult:
    """Run sgl-eval on ``harness``'s examples against ``url`` and read its answers back.

    Raises:
        ConfigError: sgl-eval is missing, an argument is refused, or ``route`` is not chat.
        ServerUnavailable: the server does not list a model at ``/v1/models``.
        EvalRunError: sgl-eval failed, wrote no usable result, or passed ``timeout_s``.
    """
    exe, extra = locate(executable), check_args(args)
    if harness.route not in (None, "chat"):
        raise ConfigError("route", harness.route, "is not what runner='sgl-eval' uses: it asks through "
                          "/v1/chat/completions only", "drop route, or use runner='builtin'")
    task = replace(harness, shots=0).load()  # sgl-eval is zero-shot: no row is kept back for shots
    _check_server(url, api_key)
    keep = work_dir is not None
    work = work_dir if work_dir is not None else Path(tempfile.mkdtemp(prefix="pytest-sglang-sgl-eval-"))
    work.mkdir(parents=True, exist_ok=True)
    io.write_dataset(task, work / "dataset.jsonl")
    deadline_s = timeout_s if timeout_s is not None else default_timeout(harness, len(task.examples))
    log_path = work / "sgl-eval.log"
    tail = io.Tail(work, len(task.examples), progress) if progress is not None else None
    start = time.perf_counter()
    code, stopped = _supervise(_argv(exe, url, harness, task, api_key, extra, work), log_path, deadline_s,
                               tail.poll if tail is not None else None)
    result = _read(task, work, log_path, extra, time.perf_counter() - start, harness.confidence, code, stopped,
                   deadline_s)
    if not keep:
        shutil.rmtree(work, ignore_errors=True)  # kept on every error above: its log is the evidence
    return result


def _check_server(url: ServerURL, api_key: str | None) -> None:
    """Fail like the built-in runner when nothing serves a model (sgl-eval would only print a traceback)."""
    try:
        with make_client(url, api_key, timeout=30.0) as client:
            resp = client.get("/v1/models")
        data = resp.json().get("data") if resp.status_code == 200 else None
    except (httpx.HTTPError, OSError, ValueError) as exc:
        raise ServerUnavailable(f"{url.display}: GET /v1/models failed ({type(exc).__name__}: {exc}).\nFix: check "
                                "the URL and that the server is up (its /health).") from None
    if not isinstance(data, list) or not data:
        raise ServerUnavailable(f"{url.display}: GET /v1/models lists no model.\nFix: point the URL at an SGLang "
                                "server.")


def _argv(exe: Path, url: ServerURL, harness: Harness, task: Task, api_key: str | None, extra: Sequence[str],
          work: Path) -> list[str]:
    # sgl-eval reads the key from argv only; the URL's own user:password is httpx Basic auth.
    base = url.base if api_key else url.unmasked()
    argv = [str(exe), "run", BENCHMARKS[task.name], "--base-url", f"{base}/v1", "--num-examples",
            str(len(task.examples)), "--num-threads", str(harness.concurrency), "--n-repeats", "1",
            "--temperature", repr(harness.temperature), "--out-dir", str(work),
            "--from-dataset", str(work / "dataset.jsonl")]
    if harness.max_tokens is not None:
        argv += ["--max-tokens", str(harness.max_tokens)]
    if api_key:
        redaction.register(api_key)
        argv += ["--api-key", api_key]
    return argv + list(extra)


def _supervise(argv: list[str], log_path: Path, timeout_s: float,
               poll: Callable[[], None] | None) -> tuple[int | None, bool]:
    """Run ``argv`` to its end or the deadline: ``(exit code, stopped by the deadline)``.

    Ctrl-C (KeyboardInterrupt) stops the tree too, then propagates.
    """
    # A mark of this run in the environment, which every descendant inherits: a descendant may leave the
    # process group that stop() kills.
    mark = uuid.uuid4().hex
    # TQDM_DISABLE: its bars redraw many times a second; the log keeps what matters (warnings, tracebacks).
    env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1", OWNER_ENV: owner_marker(),
           LAUNCH_ENV: mark}
    proc: subprocess.Popen[bytes] | None = None
    try:
        with _ctrl_c_held(), log_path.open("ab") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
        end = time.monotonic() + timeout_s
        while True:
            try:
                code = proc.wait(timeout=max(0.0, min(POLL_S, end - time.monotonic())))
                if poll is not None:
                    poll()
                return code, False
            except subprocess.TimeoutExpired:
                if poll is not None:
                    poll()
                if time.monotonic() >= end:
                    return stop(proc), True
    finally:
        if proc is not None and proc.poll() is None:  # Ctrl-C or an error of ours: never leave it running
            stop(proc)
        kill_marked(mark, grace_s=0.0)  # on every path: what left the group stop() kills


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[None]:
    """Hold a Ctrl-C until the block ends, then raise it.

    A KeyboardInterrupt between the fork and Popen's return would lose the only handle on the started
    tree (seen in CI). Signals reach only the main thread, so elsewhere there is nothing to hold.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)


def stop(proc: subprocess.Popen[bytes], grace_s: float = GRACE_S) -> int | None:
    """SIGINT (sgl-eval writes partial metrics), then SIGKILL to its process group; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: its pid is its group
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
        return None


def _read(task: Task, work: Path, log_path: Path, extra: Sequence[str], elapsed_s: float, confidence: float,
          code: int | None, stopped: bool, timeout_s: float) -> AccuracyResult:
    found = io.run_dir(work)
    metrics = io.read_metrics(found / "metrics.json") if found is not None else None
    outcomes = io.read_outcomes(found / io.PREDICTIONS) if found is not None else []
    benchmark = BENCHMARKS[task.name]
    result = AccuracyResult.from_outcomes(task.name, outcomes, io.fingerprint(task, benchmark, metrics or {}, extra),
                                          elapsed_s, confidence)
    tail = "\n".join(f"  {line}" for line in log_tail(log_path, 20))
    where = f"sgl-eval (log {log_path}, run folder {found or work})"
    if stopped:
        raise EvalRunError(f"{where} did not finish within timeout_s={timeout_s:g}: {len(outcomes)}/"
                           f"{len(task.examples)} examples answered ({result.correct} correct).\nLast lines:\n{tail}",
                           fix="raise timeout_s (eval --timeout), lower num_examples, or check the server's speed",
                           log_path=log_path, partial=result)
    if code != 0 or metrics is None:
        raise EvalRunError(f"{where} exited with code {code} and {'no' if metrics is None else 'a'} metrics.json."
                           f"\nLast lines:\n{tail}", fix="read the log above; `sgl-eval ping --base-url URL/v1` "
                           "checks the endpoint", log_path=log_path, partial=result if outcomes else None)
    score, total = (metrics.get("aggregate") or {}).get("score"), len(task.examples)
    if metrics.get("partial") or len(outcomes) != total or not _close(score, result.score):
        raise EvalRunError(f"{where} wrote {len(outcomes)} predictions for {total} examples (partial="
                           f"{metrics.get('partial', False)}, its score {score!r} vs {result.score:.4f} counted)",
                           fix=f"use sgl-eval {TESTED_VERSION}, the version this reader knows", log_path=log_path,
                           partial=result)
    return result


def _close(score: object, counted: float) -> bool:
    return isinstance(score, (int, float)) and abs(float(score) - counted) < 1e-9
