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
from collections.abc import Callable, Sequence
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
from pytest_sglang.accuracy.interval import difference
from pytest_sglang.accuracy.verdict import JUDGED, floor_bound
from pytest_sglang.cli.common import api_key, check_auth, keyword_type, server_url, writable
from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.files import read_capped
from pytest_sglang.gates.correctness.accuracy import MAX_BASELINE_BYTES, run_marker
from pytest_sglang.redaction import scrub

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
    p.add_argument("--num-examples", type=_kw("num_examples"), default=200,
                   help="examples scored, 1 to 100,000, or 'all' (every example of the data); a data set with "
                        "fewer than asked is refused (default 200)")
    p.add_argument("--shots", type=_kw("shots"), default=5, help="few-shot examples in each prompt (default 5)")
    p.add_argument("--route", choices=tuple(ROUTES), default=None,
                   help="completions, chat or generate (default: the task's SGLang harness route)")
    p.add_argument("--max-tokens", type=_kw("max_tokens"), default=None,
                   help="output tokens (default: the task's harness value)")
    p.add_argument("--temperature", type=_kw("temperature"), default=0.0,
                   help="sampling temperature (default 0, greedy)")
    p.add_argument("--concurrency", type=_kw("concurrency"), default=64, help="requests in flight (default 64)")
    p.add_argument("--request-timeout", type=_kw("request_timeout_s", "--request-timeout"), default=300.0,
                   help="seconds per request (default 300)")
    p.add_argument("--seed", type=_kw("seed"), default=1234, help="arithmetic: the generator's seed (default 1234)")
    p.add_argument("--confidence", type=_kw("confidence"), default=0.95,
                   help="interval confidence level (default 0.95)")
    p.add_argument("--min-score", type=_kw("min_score"), default=None,
                   help="the floor, from 0 to 1: fails when the interval's upper bound is below it (the score is "
                        "below the floor beyond sampling error)")
    p.add_argument("--floor-proven", action="store_true",
                   help="judge --min-score on the interval's lower bound instead: passes only when the score is "
                        "above the floor beyond sampling error")
    p.add_argument("--baseline", type=Path, default=None, help="an earlier --json output to compare with")
    p.add_argument("--max-drop", type=_kw("max_drop"), default=0.0,
                   help="drop from the baseline tolerated beyond noise")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the result as JSON to OUT")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="sent as 'Authorization: Bearer KEY' (default: env PYTEST_SGLANG_API_KEY or SGLANG_API_KEY)")
    return p


def _kw(name: str, flag: str | None = None) -> Callable[[str], object]:
    """The flag checked against ``@pytest.mark.sglang_accuracy``'s keyword: one declaration, one limit."""
    return keyword_type(run_marker, name, flag or "--" + name.replace("_", "-"))


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
    fix = "pass a file written by eval --json"
    raw = read_capped(path, option="--baseline", cap=MAX_BASELINE_BYTES, fix=fix, too_large_fix=fix)
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ConfigError("--baseline", str(path), f"cannot be read as JSON ({exc})",
                          "pass a file written by eval --json") from None
    if not isinstance(doc, dict) or "harness" not in doc:
        raise ConfigError("--baseline", str(path), "is not an eval --json result", "pass a file written by eval --json")
    return doc


def report(result: AccuracyResult, problems: Sequence[str], min_score: float | None,
           baseline: tuple[Path, dict[str, Any], float] | None = None, *, floor_proven: bool = False) -> str:
    """The summary; with ``baseline`` (its path, document and --max-drop) how the score compares with it."""
    lines = [result.summary(), "harness: " + ", ".join(f"{k}={v}" for k, v in result.harness.items()),
             f"time: {result.elapsed_s:.1f} s"]
    if min_score is not None:  # which bound is judged, with its value: never the bare bound alone
        metric, bound = floor_bound(result, floor_proven)
        lines.append(f"floor: min_score {min_score:g}, judged on {metric} {bound:.3f}: {JUDGED[floor_proven]}")
    if baseline is not None:
        lines.append(_against_baseline(result, *baseline))
    judged = [f"min_score {min_score:g}"] if min_score is not None else []
    judged += [f"baseline {baseline[0]}"] if baseline is not None else []
    floor = f" ({', '.join(judged)})" if judged else ""
    lines += [f"FAILED{floor}: {p}" for p in problems] or [f"passed{floor}"]
    return "\n".join(lines)


def _against_baseline(result: AccuracyResult, path: Path, doc: dict[str, Any], max_drop: float) -> str:
    """``baseline x.json: 0.800 (24/30) -> 0.812, change +0.012 (95% interval [-0.15, +0.17]), max_drop 0``."""
    correct, total = doc.get("correct"), doc.get("total")
    if not isinstance(correct, int) or not isinstance(total, int) or total <= 0:
        return f"baseline {path}: no correct/total counts to compare with"
    d, low, high = difference((result.correct, result.total), (correct, total), result.confidence)
    return (f"baseline {path}: {correct / total:.3f} ({correct}/{total}) -> {result.score:.3f}, change {d:+.3f} "
            f"({result.confidence:.0%} interval [{low:+.3f}, {high:+.3f}]; fails below -max_drop={-max_drop:g})")


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
    key = api_key(args.api_key)
    if args.floor_proven and args.min_score is None:
        parser.error("--floor-proven: says how --min-score is judged, and no --min-score was given. "
                     "Fix: add --min-score 0.74 (the floor the interval's lower bound must reach)")
    try:
        url = server_url(args.url)
        writable(args.json, "--json", "the JSON result")
        harness = Harness(task=args.task, num_examples=args.num_examples, shots=args.shots, route=args.route,
                          max_tokens=args.max_tokens, temperature=args.temperature, concurrency=args.concurrency,
                          request_timeout_s=args.request_timeout, data=args.data, seed=args.seed,
                          confidence=args.confidence, hub_timeout_s=args.hub_timeout)
        baseline = _baseline(args.baseline)
        check_auth(url, key)
        result = evaluate(url, harness, api_key=key.value, progress=Progress(sys.stderr), runner=args.runner,
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
    problems = judge(result, args.min_score, baseline=baseline, max_drop=args.max_drop,
                     floor_proven=args.floor_proven)
    against = (args.baseline, baseline, args.max_drop) if baseline is not None and args.baseline else None
    print(scrub(report(result, problems, args.min_score, against, floor_proven=args.floor_proven)))
    if args.json is not None:
        judged = floor_bound(result, args.floor_proven)[0] if args.min_score is not None else None
        doc = {**result.to_json(), "verdict": {"min_score": args.min_score, "floor_proven": args.floor_proven,
                                               "judged": judged, "passed": not problems, "problems": problems}}
        args.json.write_text(scrub(json.dumps(doc, indent=1)) + "\n")
    return EXIT_FAILED if problems else EXIT_OK


def _split(parser: argparse.ArgumentParser, text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        parser.error(f"--sgl-eval-args={text!r}: cannot be split like a shell line ({exc}). Fix: balance the quotes")
