"""``python -m pytest_sglang trend REPORT.json... | DIR``: change points over a history of nightly runs.

Reads one JSON report per run (``--sglang-report``; any order: runs are ordered by the time each
report was written and named by ``--sglang-run-label``), finds the change points of every figure
with Apache Otava, and names the run where a figure shifted, by how much and with what confidence.

Exit codes: 0 no new change point makes a metric worse; 1 a new one does (it was not there before the
last ``--new-runs`` runs, and ``--confirm`` runs are at its new level); 2 bad input (an unreadable or
foreign file, a bad option, Otava missing); 3 nothing could be judged: every series has fewer runs
than a change point needs, or no report has a figure of the metrics followed.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Sequence

from pytest_sglang.errors import ConfigError
from pytest_sglang.formatting import fmt
from pytest_sglang.report import trend as engine
from pytest_sglang.report.baseline import DEFAULT_METRICS, metric_name
from pytest_sglang.report.changepoint import MAX_PVALUE, MIN_RUNS, require
from pytest_sglang.report.history import Run, in_order, key_text, read_run, report_paths, version_changes

_PROG = "python -m pytest_sglang trend"


def _number(flag: str, low: float, high: float | None, example: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text.strip().removesuffix("%"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: not a number. Fix: pass {flag} {example}"
                                             ) from None
        if not (value > low if high is not None else value >= low) or (high is not None and value >= high):
            span = f"between {low:g} and {high:g} (both excluded)" if high is not None else f">= {low:g}"
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: must be {span}. Fix: pass {flag} {example}")
        return value

    return parse


def _runs_type(flag: str, example: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: not a whole number. Fix: pass {flag} "
                                             f"{example}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: must be >= 1. Fix: pass {flag} {example}")
        return value

    return parse


def _metric(text: str) -> str:
    try:
        return metric_name(text.strip(), text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: {exc.problem}. Fix: {exc.fix}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=_PROG, description="Find change points over a history of pytest-sglang JSON "
                                "reports (one per nightly run). Exit 0 no new regression, 1 a new change point "
                                "makes a metric worse, 2 bad input, 3 every series too short.")
    p.add_argument("reports", nargs="+", metavar="REPORT", help="JSON reports (--sglang-report), or folders of them")
    p.add_argument("--metric", action="append", type=_metric, default=None, metavar="NAME",
                   help="a figure to follow (repeatable; default the baseline's metrics: "
                   "output_throughput, p99_ttft_ms, ..., max_total_num_tokens, ...)")
    p.add_argument("--max-pvalue", type=_number("--max-pvalue", 0, 1, "0.001"), default=MAX_PVALUE, metavar="P",
                   help=f"significance a change point needs (default {MAX_PVALUE:g}, Otava's)")
    p.add_argument("--min-change", type=_number("--min-change", 0, None, "5%"), default=0.0, metavar="PCT",
                   help="ignore change points smaller than this, in percent (default 0)")
    p.add_argument("--new-runs", type=_runs_type("--new-runs", "1"), default=1, metavar="N",
                   help="a change point is new when the history without its last N runs does not show it "
                   "(default 1: the run just added)")
    p.add_argument("--confirm", type=_runs_type("--confirm", "2"), default=engine.CONFIRM, metavar="N",
                   help=f"runs at the new level a change point needs before it can fail (default {engine.CONFIRM}: "
                   "one outlying last run is not a change)")
    p.add_argument("--skip-unreadable", action="store_true",
                   help="leave out (and name) unreadable or foreign files instead of exiting 2")
    return p


def _read(parser: argparse.ArgumentParser, paths: Sequence[str], metrics: Sequence[str], skip: bool) -> list[Run]:
    runs, bad = [], []
    for path in paths:
        try:
            runs.append(read_run(path, metrics))
        except ConfigError as exc:
            bad.append(f"{path}: {exc.problem}")
    for line in bad:
        print(f"{'left out' if skip else 'error'}: {line}", file=sys.stderr)
    if bad and not skip:
        parser.exit(engine.BAD_INPUT, f"{_PROG}: error: {len(bad)} of {len(paths)} file(s) are not readable JSON "
                    "reports. Fix: remove them, or pass --skip-unreadable to leave them out\n")
    if not runs:
        parser.exit(engine.BAD_INPUT, f"{_PROG}: error: no readable JSON report among {len(paths)} file(s)\n")
    return in_order(runs)


def _say(text: str, indent: str = "") -> None:
    print(textwrap.fill(text, 100, initial_indent=indent, subsequent_indent=indent + "    ", break_on_hyphens=False))


def _confidence(pvalue: float) -> str:
    shown = "> 99.99%" if pvalue < 1e-4 else f"{1 - pvalue:.2%}"
    return f"confidence {shown} (p={pvalue:.2g})"


def _finding(finding: engine.Finding) -> None:
    s = finding.shift
    tags = ("NEW, " if finding.new else "") + ("worse" if finding.worse else "better")
    if finding.pending:
        tags += f", pending: judged once {finding.confirm} runs are at the new level"
    _say(key_text(finding.key), "  ")
    _say(f"from run {finding.run.name} ({finding.run.path}) on: {fmt(s.before)} -> {fmt(s.after)} "
         f"({s.change_pct:+.1f}%), {_confidence(s.pvalue)}: {tags}", "    ")
    tracked = version_changes(finding.previous, finding.run)
    if tracked:
        _say(f"changed at that run: {'; '.join(tracked)}", "    ")


def _print(trend: engine.Trend, args: argparse.Namespace) -> None:
    runs = trend.runs
    print(f"trend: {len(runs)} runs, {runs[0].name} .. {runs[-1].name}; change points by Apache Otava "
          f"(E-divisive means), p < {args.max_pvalue:g}" + (f", change >= {args.min_change:g}%" if args.min_change
                                                              else ""))
    if len(trend.segments) == 1:
        print("configuration: the same in every run")
    for number, part in enumerate(trend.segments[1:], start=2):
        _say(f"configuration {number} from run {part.runs[0].name} ({part.runs[0].path}): "
             f"{'; '.join(part.changed)}. A change of configuration is not a regression: change points are "
             f"searched within each configuration ({len(part.runs)} runs in this one)")
    for key, names in trend.failed:
        _say(f"{key_text(key)}: left out of {len(names)} run(s) whose load had failed requests: {', '.join(names)}")
    for key, count, segment in trend.short:
        where = f" of configuration {segment + 1}" if len(trend.segments) > 1 else ""
        _say(f"too short: {key_text(key)} has {count} run(s){where}; a change point needs {MIN_RUNS}")
    print(f"{len(trend.findings)} change point(s) in {trend.judged} series judged")
    for finding in trend.findings:
        _finding(finding)


def _verdict(trend: engine.Trend, metrics: Sequence[str]) -> None:
    code = trend.exit_code
    if code == engine.NEW_REGRESSION:
        print(f"FAILED: {len(trend.new_regressions)} new change point(s) make a metric worse (exit 1)")
    elif code == engine.TOO_SHORT and not trend.short:
        print(f"NOTHING JUDGED: no report has a figure of {', '.join(metrics)}: give --metric names the reports "
              "measure (load metrics such as output_throughput, gate figures such as max_total_num_tokens) (exit 3)")
    elif code == engine.TOO_SHORT:
        print(f"NOTHING JUDGED: every series has fewer than {MIN_RUNS} runs; add runs (exit 3)")
    else:
        print("passed: no new change point makes a metric worse (exit 0)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        require("trend")
        paths = report_paths(args.reports)
    except ConfigError as exc:
        parser.exit(engine.BAD_INPUT, f"{_PROG}: error: {exc}\n")
    metrics = args.metric or DEFAULT_METRICS
    runs = _read(parser, paths, metrics, args.skip_unreadable)
    trend = engine.analyse(runs, max_pvalue=args.max_pvalue, min_change_pct=args.min_change, new_runs=args.new_runs,
                           confirm=args.confirm)
    _print(trend, args)
    _verdict(trend, metrics)
    return trend.exit_code
