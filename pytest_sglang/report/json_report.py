"""The JSON report (``--sglang-report``): one dict that every other output is rendered from.

Terminal, Markdown and HTML all render this dict, so ``python -m pytest_sglang compare`` and a
later re-render read exactly what the run wrote. Its shape is published as
``schemas/report.schema.json`` (``schema_version`` bumps on incompatible changes).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_sglang.redaction import scrub
from pytest_sglang.report.baseline import BaselineSummary
from pytest_sglang.report.fingerprint import fingerprint
from pytest_sglang.report.fleet import fleet_section
from pytest_sglang.report.identity import ServerIdentity
from pytest_sglang.report.records import START_NODEID, TestRecord, strip_requests
from pytest_sglang.sglang.masks import scrub_payload
from pytest_sglang.version import SGLANG_VERSION, __version__

#: 2: the ``fleet`` section (workers behind a gateway, request shares, failover timelines).
SCHEMA_VERSION = 2
SCHEMA_ID = "https://github.com/pytest-sglang/pytest-sglang/schemas/report-v2.schema.json"


def build_report(tests: Sequence[TestRecord], identity: ServerIdentity | None, *,
                 duration_s: float = 0.0, exitstatus: int | None = None,
                 baseline: BaselineSummary | None = None, notes: Sequence[str] = (),
                 interrupted: bool = False, fleet: Mapping[str, Any] | None = None,
                 run_label: str | None = None) -> dict[str, Any]:
    """Assemble the report (with per-request records; :func:`for_file` strips them unless asked).

    ``interrupted``: the run was stopped (Ctrl-C, SIGTERM) before every test ran. ``fleet``: the
    fleet behind the gateway (:func:`~pytest_sglang.report.fleet.identify_fleet`), None for one server.
    ``run_label``: the commit or version the user named the run by (``--sglang-run-label``), or None.
    """
    rows = [r.to_dict() for t in tests for r in t.rows()]
    # The server start has a row in the table but is not a test: counting it said "4 tests" for 3.
    start = next((t for t in tests if t.nodeid == START_NODEID), None)
    # A test interrupted after its setup neither passed nor failed: it is not counted.
    real = [t for t in tests if t.nodeid != START_NODEID and (t.ran or t.outcome != "passed")]
    counts = {k: sum(1 for t in real if t.outcome == k) for k in ("passed", "failed", "error", "skipped")}
    report: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "schema_version": SCHEMA_VERSION,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "run_label": run_label,  # --sglang-run-label: a commit or version, how `trend` names this run
        "pytest_sglang_version": __version__,
        "tested_sglang_version": SGLANG_VERSION,
        "duration_s": round(duration_s, 3),
        "exitstatus": exitstatus,
        "server": identity.to_dict() if identity is not None else None,
        "fleet": fleet_section(fleet, tests),
        "fingerprint": fingerprint(identity),
        "summary": {"tests": len(real), **counts, "checks": len(rows),
                    "checks_failed": sum(1 for r in rows if not r["passed"]),
                    "server_start": start.outcome if start is not None else None,
                    "interrupted": interrupted},
        "records": rows,
        "tests": [t.to_dict(requests=True) for t in tests],
        "baseline": dict(baseline) if baseline is not None else None,
        "notes": [scrub(n) for n in notes],
    }
    result: dict[str, Any] = scrub_payload(report)
    return result


def for_file(report: Mapping[str, Any], *, requests: bool) -> dict[str, Any]:
    """The report as written: per-request records only with ``--sglang-report-requests``."""
    if requests:
        return dict(report)
    tests = [{**t, "loads": [strip_requests(ld) for ld in t.get("loads", [])]}
             for t in report.get("tests", [])]
    return {**report, "tests": tests}


def write_json(report: Mapping[str, Any], path: str | Path, *, requests: bool = False) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(for_file(report, requests=requests), indent=2, sort_keys=False, default=str)
    target.write_text(scrub(text) + "\n", encoding="utf-8")
    return target


def load_schema() -> dict[str, Any]:
    """The published schema, from the installed package (wheel) or the source tree."""
    from importlib import resources

    try:
        text = resources.files("pytest_sglang").joinpath("schemas/report.schema.json").read_text("utf-8")
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):
        text = (Path(__file__).resolve().parents[2] / "schemas" / "report.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validation_errors(report: Mapping[str, Any]) -> list[str]:
    """``json_path: message`` for every schema violation (empty when the report is valid)."""
    import jsonschema

    schema = load_schema()
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{e.json_path}: {e.message[:200]}" for e in validator.iter_errors(report)]
