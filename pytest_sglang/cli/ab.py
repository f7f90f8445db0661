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
from pytest_sglang.errors import ConfigError
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
    # No argparse defaults: only the flags given go to the suite, which puts them over DEFAULT_LOAD (one merge).
    shape = p.add_argument_group("the load of each launch (LoadSpec fields; unset ones: the A/B's default load)",
                                 argument_default=argparse.SUPPRESS)
    shape.add_argument("--requests", type=int,
                       help=f"requests per launch (default {DEFAULT_LOAD['requests']}: a p99 needs at least 100, "
                            "below it is 'cannot judge')")
    shape.add_argument("--concurrency", type=int,
                       help=f"default {DEFAULT_LOAD['concurrency']} unless --request-rate is given")
    shape.add_argument("--request-rate", type=float, help="requests per second (default: all at once)")
    shape.add_argument("--input-len", type=int, help=f"default {DEFAULT_LOAD['input_len']}")
    shape.add_argument("--output-len", type=int, help=f"default {DEFAULT_LOAD['output_len']}")
    shape.add_argument("--range-ratio", type=float,
                       help=f"lengths drawn from [ratio*len, len] (bench_serving's --random-range-ratio; default "
                            f"{DEFAULT_LOAD['range_ratio']}: equal lengths run a burst in lock-step waves and make "
                            "its p99 TTFT noisy)")
    shape.add_argument("--dataset", help="default random-ids")
    shape.add_argument("--warmup", type=int, help="default 1")
    shape.add_argument("--seed", type=int, help="the prompts' seed (pair i uses seed + i; default 42)")
    return p


def given_load(args: argparse.Namespace) -> dict[str, object]:
    """The LoadSpec fields of the flags given, checked over the default load; errors name the flag.

    The parser's only arguments are the shape flags, without defaults: ``args`` holds just those given,
    each under its LoadSpec field name (argparse's dest).
    """
    given: dict[str, object] = dict(vars(args))
    try:
        LoadSpec(**load_fields(given))  # type: ignore[arg-type]  # LoadSpec checks each value
    except ConfigError as exc:
        field = exc.source.removeprefix("LoadSpec.")
        if field not in given:
            raise
        raise ConfigError(f"--{field.replace('_', '-')}", exc.value, exc.problem, exc.fix) from None
    return given


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
    try:
        given = given_load(args)
    except (TypeError, ValueError) as exc:  # ConfigError, reworded for the flag, or LoadSpec's own
        parser.error(str(exc))
    os.environ[ENV] = json.dumps(given)
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
