"""``python -m pytest_sglang ab``: an interleaved A/B run for CI before a promotion.

It runs pytest on the shipped A/B suite (``pytest_sglang.ab``), so configurations are given with the
plugin's own options and every runner, fleet, prefill-decode pair, Ray and report option works as in
a test run: A is ``--sglang-launch`` (with ``--sglang-image``, ``--sglang-python``, ``--sglang-workers``,
``--sglang-gateway``...), B is ``--sglang-ab-launch`` / ``--sglang-ab-image`` / ``--sglang-ab-python`` /
``--sglang-ab-gateway``. This command adds the load's shape (``--requests``, ``--concurrency``...) and
an exit code a CI step can branch on:

- 0: B is within the limit of A (every metric judged);
- 1: B regressed beyond the limit and beyond the noise (or the run failed);
- 2: a usage error (bad flag or option, nothing launched);
- 3: cannot judge: the noise measured is too large for the launches given (the output says how many).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import pytest

from pytest_sglang.ab import ENV
from pytest_sglang.gates.load.ab import DEFAULT_LOAD, load_fields
from pytest_sglang.loadgen import LoadSpec
from pytest_sglang.plugin.options import OPTIONS

EXIT_PASS, EXIT_REGRESSION, EXIT_USAGE, EXIT_CANNOT_JUDGE = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_sglang ab",
        description="Launch A and B in turn (N each), one load per launch, and judge B on the paired\n"
        "differences. Every other argument goes to pytest: the plugin's --sglang-* options give A\n"
        "(--sglang-launch ...) and B (--sglang-ab-launch ...), the launches (--sglang-ab-launches N)\n"
        "and the reports (docs/reports.md, \"Interleaved A/B\").",
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    shape = p.add_argument_group("the load of each launch (LoadSpec fields)")
    shape.add_argument("--requests", type=int, default=DEFAULT_LOAD["requests"],
                       help="requests per launch (default %(default)s: a p99 needs at least 100, below it is "
                            "'cannot judge')")
    shape.add_argument("--concurrency", type=int, default=None,
                       help=f"default {DEFAULT_LOAD['concurrency']} unless --request-rate is given")
    shape.add_argument("--request-rate", type=float, default=None)
    shape.add_argument("--input-len", type=int, default=DEFAULT_LOAD["input_len"])
    shape.add_argument("--output-len", type=int, default=DEFAULT_LOAD["output_len"])
    shape.add_argument("--range-ratio", type=float, default=DEFAULT_LOAD["range_ratio"],
                       help="lengths drawn from [ratio*len, len] (bench_serving's --random-range-ratio; default "
                            "%(default)s: equal lengths run a burst in lock-step waves and make its p99 TTFT noisy)")
    shape.add_argument("--dataset", default="random-ids")
    shape.add_argument("--warmup", type=int, default=1)
    shape.add_argument("--seed", type=int, default=42, help="the prompts' seed (pair i uses seed + i)")
    return p


def _epilog() -> str:
    """The exit codes, and the plugin's options this command passes to pytest (one table: the plugin's)."""
    lines = ["exit codes: 0 pass, 1 regression (or the run failed), 2 usage error, 3 cannot judge", "",
             "pytest-sglang options (passed to pytest; A is the run's launch, B the --sglang-ab-* ones):"]
    lines += [f"  {option.cli}" + (f"={option.metavar}" if option.metavar else "") for option in OPTIONS]
    return "\n".join(lines)


class _Verdict:
    """Sees the A/B test's outcome: passed, failed, or skipped because it could not judge."""

    def __init__(self) -> None:
        self.outcome: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid.endswith("test_ab") and (report.when == "call" or report.outcome != "passed"):
            if self.outcome in (None, "passed"):
                self.outcome = report.outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    given: dict[str, object] = {"requests": args.requests, "input_len": args.input_len,
                                "output_len": args.output_len, "range_ratio": args.range_ratio,
                                "dataset": args.dataset, "warmup": args.warmup, "seed": args.seed}
    given.update({name: value for name, value in (("request_rate", args.request_rate),
                                                  ("concurrency", args.concurrency)) if value is not None})
    fields = load_fields(given)
    try:
        LoadSpec(**fields)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    os.environ[ENV] = json.dumps(fields)
    verdict = _Verdict()
    # This command imported pytest_sglang before pytest started: pytest would warn that it cannot rewrite
    # its asserts, which the suite does not use.
    code = pytest.main(["--pyargs", "pytest_sglang.ab", "-p", "no:cacheprovider", "-rs",
                        "-W", "ignore::pytest.PytestAssertRewriteWarning", *rest], plugins=[verdict])
    if code == pytest.ExitCode.USAGE_ERROR:
        return EXIT_USAGE
    if verdict.outcome == "skipped":
        return EXIT_CANNOT_JUDGE
    if verdict.outcome == "passed" and code == pytest.ExitCode.OK:
        return EXIT_PASS
    return EXIT_REGRESSION
