"""``python -m pytest_sglang eval --url URL --task gsm8k --data test.jsonl --min-score 0.7 --json OUT``.

Runs an accuracy task the way SGLang's own harnesses do (or, with ``--runner sgl-eval``, through
SGLang's official client) and judges the score with its binomial (Wilson) confidence interval: it
fails when the interval's upper bound is below ``--min-score``, or when ``--baseline`` (an earlier
``--json`` output) shows a drop larger than the interval allows. gsm8k and mmlu without ``--data``
come from the Hugging Face hub.

Exit codes: 0 passed, 1 below the floor or the baseline, 2 bad input, 3 the run could not be made
(server down, hub unreachable, sgl-eval failed, deadline passed), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from pytest_sglang.accuracy import (
    ROUTES,
    RUNNERS,
    TASKS,
    AccuracyResult,
    DataUnavailable,
    EvalRunError,
    Harness,
    evaluate,
    judge,
)
from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.redaction import register, scrub
from pytest_sglang.server.url import parse_server_url

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANNOT_RUN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytest_sglang eval",
                                description="Score an SGLang server on an accuracy task, with a confidence interval.")
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--task", required=True, choices=TASKS,
                   help="arithmetic is generated; gsm8k/mmlu read --data, else the Hugging Face hub")
    p.add_argument("--data", type=Path, default=None,
                   help="local data: gsm8k JSONL, mmlu CSV/JSONL or its data/ folder, or the hub's parquet")
    p.add_argument("--hub-timeout", type=float, default=120.0, help="seconds a hub download may take (default 120)")
    p.add_argument("--runner", choices=RUNNERS, default="builtin",
                   help="builtin (default) or sgl-eval (SGLang's official client; the verdict stays ours)")
    p.add_argument("--sgl-eval", default=None, metavar="PATH",
                   help="the sgl-eval executable (default: sgl-eval on PATH)")
    p.add_argument("--sgl-eval-args", default="", metavar="ARGS",
                   help="more `sgl-eval run` flags, one string (e.g. '--prompt my.yaml --seed 0')")
    p.add_argument("--sgl-eval-dir", type=Path, default=None, metavar="DIR",
                   help="keep sgl-eval's dataset, log and run folder in DIR (default: a temporary folder)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="one deadline for the whole run (default: bounded per request; sgl-eval: derived)")
    p.add_argument("--num-examples", type=int, default=200, help="examples scored (default 200)")
    p.add_argument("--shots", type=int, default=5, help="few-shot examples in each prompt (default 5)")
    p.add_argument("--route", choices=tuple(ROUTES), default=None,
                   help="completions, chat or generate (default: the task's SGLang harness route)")
    p.add_argument("--max-tokens", type=int, default=None, help="output tokens (default: the task's harness value)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0, greedy)")
    p.add_argument("--concurrency", type=int, default=64, help="requests in flight (default 64)")
    p.add_argument("--request-timeout", type=float, default=300.0, help="seconds per request (default 300)")
    p.add_argument("--seed", type=int, default=1234, help="arithmetic: the generator's seed (default 1234)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval confidence level (default 0.95)")
    p.add_argument("--min-score", type=float, default=None, help="fail when the interval's upper bound is below it")
    p.add_argument("--baseline", type=Path, default=None, help="an earlier --json output to compare with")
    p.add_argument("--max-drop", type=float, default=0.0, help="drop from the baseline tolerated beyond noise")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the result as JSON to OUT")
    p.add_argument("--api-key", default=None, metavar="KEY", help="sent as 'Authorization: Bearer KEY'")
    return p


class Progress:
    """``[####....] 120/200 examples, 0.74 correct so far, 3.1 s`` on a terminal; silent otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.enabled, self.started, self.last = stream, stream.isatty(), time.monotonic(), 0.0

    def __call__(self, done: int, total: int, correct: int) -> None:
        now = time.monotonic()
        if not self.enabled or (done < total and now - self.last < 0.1):
            return
        self.last = now
        filled = 30 * done // max(total, 1)
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} examples, "
                          f"{correct / max(done, 1):.2f} correct so far, {now - self.started:.1f} s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def _baseline(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError("--baseline", str(path), f"cannot be read as JSON ({exc})",
                          "pass a file written by eval --json") from None
    if not isinstance(doc, dict) or "harness" not in doc:
        raise ConfigError("--baseline", str(path), "is not an eval --json result", "pass a file written by eval --json")
    return doc


def report(result: AccuracyResult, problems: Sequence[str], min_score: float | None) -> str:
    lines = [result.summary(), "harness: " + ", ".join(f"{k}={v}" for k, v in result.harness.items()),
             f"time: {result.elapsed_s:.1f} s"]
    floor = f" (min_score {min_score:g})" if min_score is not None else ""
    lines += [f"FAILED{floor}: {p}" for p in problems] or [f"passed{floor}"]
    return "\n".join(lines)


#: Harness fields as this command's flags, so a message names what the user typed.
_FLAGS = {"num_examples": "--num-examples", "request_timeout_s": "--request-timeout", "max_tokens": "--max-tokens",
          "shots": "--shots", "concurrency": "--concurrency", "temperature": "--temperature",
          "confidence": "--confidence", "route": "--route", "task": "--task", "runner": "--runner",
          "sgl_eval": "--sgl-eval", "sgl_eval_args": "--sgl-eval-args", "timeout_s": "--timeout",
          "hub_timeout_s": "--hub-timeout"}


def _in_flags(exc: ConfigError) -> str:
    text = str(exc)
    flag = _FLAGS.get(exc.source)
    return text.replace(f"{exc.source}=", f"{flag}=", 1) if flag else text


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    register(args.api_key)
    try:
        url = parse_server_url(args.url, source="--url")
        harness = Harness(task=args.task, num_examples=args.num_examples, shots=args.shots, route=args.route,
                          max_tokens=args.max_tokens, temperature=args.temperature, concurrency=args.concurrency,
                          request_timeout_s=args.request_timeout, data=args.data, seed=args.seed,
                          confidence=args.confidence, hub_timeout_s=args.hub_timeout)
        baseline = _baseline(args.baseline)
        result = evaluate(url, harness, api_key=args.api_key, progress=Progress(sys.stderr), runner=args.runner,
                          sgl_eval=args.sgl_eval, sgl_eval_args=_split(parser, args.sgl_eval_args),
                          timeout_s=args.timeout, work_dir=args.sgl_eval_dir)
    except (ServerUnavailable, DataUnavailable, EvalRunError) as exc:
        print(f"error: {scrub(_in_flags(exc) if isinstance(exc, ConfigError) else str(exc))}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    except ConfigError as exc:
        parser.error(scrub(_in_flags(exc)))
    except KeyboardInterrupt:
        print("\ninterrupted: the run was stopped and its requests cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED
    problems = judge(result, args.min_score, baseline=baseline, max_drop=args.max_drop)
    print(scrub(report(result, problems, args.min_score)))
    if args.json is not None:
        doc = {**result.to_json(), "verdict": {"min_score": args.min_score, "passed": not problems,
                                               "problems": problems}}
        args.json.write_text(scrub(json.dumps(doc, indent=1)) + "\n")
    return EXIT_FAILED if problems else EXIT_OK


def _split(parser: argparse.ArgumentParser, text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        parser.error(f"--sgl-eval-args={text!r}: cannot be split like a shell line ({exc}). Fix: balance the quotes")
