"""``python -m pytest_sglang compare OLD.json NEW.json``: the baseline comparison without pytest.

NEW is the candidate: what it changes (launch args, SGLang version, image) is compared and listed as
``candidate vs baseline``; reports measured on another setup (model, GPU, host) are not compared.

Exit codes: 0 no regression, 1 regression (or, with ``--strict``, another setup or workload; or NEW has
figures and none of its tests is in OLD), 2 bad input (unreadable report, a figure that is NaN, infinite or
not a number, bad ``--max-regression``).
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from pytest_sglang.cli.common import in_flag_words, setting_default
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.report.baseline import Limits, compare_test, gate_figures, load_report, parse_limits
from pytest_sglang.report.baseline_file import BaselineIndex
from pytest_sglang.report.fingerprint import changes, incomparable
from pytest_sglang.report.text import clip, value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytest_sglang compare",
                                description="Compare two pytest-sglang JSON reports (--sglang-report).")
    p.add_argument("old", metavar="OLD.json", help="the baseline report")
    p.add_argument("new", metavar="NEW.json", help="the report of the run to check")
    p.add_argument("--max-regression", metavar="LIMITS", default=setting_default("--max-regression"),
                   help="5%% or output_throughput:5%%,p99_ttft_ms:10%% (default: 5%% on the default metrics)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when the reports were measured on another setup or workload")
    return p


def compare_reports(old: dict[str, Any], new: dict[str, Any], limits: Limits, *, strict: bool = False
                    ) -> list[GateOutcome]:
    """Per test of NEW that OLD also ran (by id, or by key: another rootdir): loads and capacity/hicache figures."""
    baseline = BaselineIndex(old.get("tests", []))
    outcomes = []
    for test in new.get("tests", []):
        found = baseline.find(test["nodeid"], test.get("key"))
        if found is not None:
            outcome = compare_test(test["nodeid"], found.test, test.get("loads", []),
                                   test.get("gates", []), limits, strict=strict)
            matched = found.note("OLD.json")
            if outcome is not None:
                outcome.notes[:0] = [matched] if matched else []
                outcomes.append(outcome)
    return outcomes


def not_in_old(old: dict[str, Any], new: dict[str, Any], limits: Limits) -> tuple[int, list[str]]:
    """How many tests of NEW have figures to compare, and the ids of those OLD does not have."""
    baseline = BaselineIndex(old.get("tests", []))
    measured = [t for t in new.get("tests", []) if t.get("loads") or gate_figures(t.get("gates", []), limits)]
    return len(measured), [t["nodeid"] for t in measured if baseline.find(t["nodeid"], t.get("key")) is None]


def _print_outcomes(outcomes: Sequence[GateOutcome]) -> None:
    print(f"  {'metric':<22} {'baseline -> this run':>34} {'limit':>11} verdict")
    for outcome in outcomes:
        print(clip(str(outcome.context.get("test", "")), 80))
        for check in outcome.checks:
            if check.metric == "workload":  # --strict: another workload is a failure, not a figure
                print(textwrap.fill(f"workload differs (--strict: fails): {check.detail}", 80,
                                    initial_indent="  ", subsequent_indent="    "))
                continue
            before = check.detail.removeprefix("baseline ").split(", this run ", 1)[0]
            found = re.search(r"\(([-+][^)]*%)\)", check.detail)
            change = found.group(1) if found else ""
            moved = f"{before} -> {value(check.measured)} ({change})"
            limit = f"{check.op} {value(check.required)}"
            verdict = "ok" if check.passed else "REGRESSED"
            if len(moved) <= 34 and len(limit) <= 11:
                print(f"  {check.metric:<22} {moved:>34} {limit:>11} {verdict}")
            else:  # a figure is never cut: both go whole on the line below
                print(f"  {check.metric:<22} {'(below)':>34} {'':>11} {verdict}")
                print(textwrap.fill(f"{moved}, limit {limit}", 80, initial_indent="    ", subsequent_indent="      "))
        for note in outcome.notes:
            if "not compared" in note or note.startswith("matched by"):  # regressions are on their rows already
                print(textwrap.fill(note, 80, initial_indent="  ", subsequent_indent="    "))
        for line in outcome.unchecked:  # the third verdict: neither ok nor regressed
            print(textwrap.fill(line, 80, initial_indent="  ", subsequent_indent="    "))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        limits = parse_limits(args.max_regression)
        old, new = load_report(args.old, "OLD.json"), load_report(args.new, "NEW.json")
    except ConfigError as exc:
        print(in_flag_words(f"error: {exc}"), file=sys.stderr)
        return 2
    old_fp, new_fp = old.get("fingerprint", {}), new.get("fingerprint", {})
    diff = incomparable(old_fp, new_fp)
    print(f"baseline {args.old}\nthis run {args.new}")
    if diff:
        print("NOT COMPARED: measured on another setup" + (" (--strict: fails)" if args.strict else " (warning)")
              + ":")
        print("\n".join(f"  - {d}" for d in diff))
        return 1 if args.strict else 0
    changed = changes(old_fp, new_fp)
    if not changed:
        print("fingerprint matches")
    for change in changed:
        print(textwrap.fill(f"candidate vs baseline: {change.line()}", 80, subsequent_indent="    ",
                            break_on_hyphens=False))
    outcomes = compare_reports(old, new, limits, strict=args.strict)
    print(textwrap.fill("limits: " + ", ".join(f"{m} {p:g}%" for m, p in limits.items()), 80,
                        subsequent_indent="        "))
    measured, missing = not_in_old(old, new, limits)
    if measured and len(missing) == measured:  # comparing was the point: a report of other tests is no pass
        print(textwrap.fill(f"COMPARED NOTHING: none of the {measured} test(s) of NEW.json with figures is in "
                            f"OLD.json ({', '.join(missing[:3])}{' ...' if measured > 3 else ''}). Fix: compare "
                            "reports of the same tests", 80, subsequent_indent="  "))
        return 1
    for nodeid in missing:
        print(textwrap.fill(f"not compared: OLD.json has no test {nodeid} (renamed, or new since)", 80,
                            subsequent_indent="  "))
    if not outcomes:
        print("nothing to compare: no test has load results or capacity figures in both reports")
    _print_outcomes(outcomes)
    regressions = [c for o in outcomes for c in o.failed]
    print(f"{len(regressions)} regression(s) in {sum(len(o.checks) for o in outcomes)} comparisons")
    return 1 if regressions else 0
