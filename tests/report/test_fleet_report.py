"""The fleet section of the reports: workers, request shares, failover timelines (JSON schema v2, terminal, MD, HTML).

Units build the section from what the gates really record (the failover gate's ``judge`` on a hand-made
run, a throughput outcome with ``worker_shares``); one pytester session launches a simulator fleet behind
smg and checks every output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
import sample

from pytest_sglang.fleet.discovery import WorkerEntry
from pytest_sglang.fleet.handle import SGLangFleet
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.gates.fleet import failover
from pytest_sglang.gates.fleet.failover_run import FailoverRun, Snapshot
from pytest_sglang.loadgen import LoadResult, LoadSpec, RequestRecord
from pytest_sglang.report import fleet, html, json_report, markdown, terminal
from pytest_sglang.report.records import TestRecord as Record
from pytest_sglang.server.handle import SGLangServer

W0, W1 = "http://10.0.0.1:30000", "http://10.0.0.2:30000"


@dataclass
class FakeWorker:
    index: int
    url: str
    info_payload: dict[str, Any] | None
    healthy: bool = True
    role: str = "regular"
    server: None = None  # no worker handle: the report asks info()
    entry: WorkerEntry = field(init=False)

    def __post_init__(self) -> None:
        self.entry = WorkerEntry(self.url, "regular", self.healthy, model_id="m", facts={"version": "0.5.22"})

    @property
    def reachable(self) -> bool:
        return self.info_payload is not None

    def info(self) -> dict[str, Any]:
        if self.info_payload is None or "boom" in self.info_payload:
            raise RuntimeError("worker gone")
        return self.info_payload


def _fake_server(workers: list[FakeWorker], *, end_health: dict[str, bool] | None = None) -> Any:
    def discover() -> Any:
        if end_health is None:
            raise RuntimeError("gateway gone")
        return SimpleNamespace(workers=[SimpleNamespace(url=u, is_healthy=h) for u, h in end_health.items()])

    # A real fleet handle (the reports recognise it by its type) over fake workers and a fake /workers.
    gateway = SGLangServer("http://127.0.0.1:8000", "simulator")
    fake_fleet = SGLangFleet(gateway, "smg", cast(Any, workers), version="1.13.0", restarter=cast(Any, object()))
    fake_fleet.discover = discover  # type: ignore[method-assign]
    return fake_fleet


def _failover_outcome(server: Any) -> GateOutcome:
    """What the failover gate records for a kill at 3 s, detection at 4 s, recovery 5 s after a 4.5 s restart."""
    spec = LoadSpec(requests=100, concurrency=8)
    origin = 1_000.0
    run = FailoverRun(server, 0, 9, spec, max_detect_s=2.0, max_recover_s=1.0)
    run.result = LoadResult(spec=spec, completed=96, failed=4, errors={"stream_error": 4}, duration=10.0, records=[
        RequestRecord(index=i, start=0.1 * i, start_time=origin + 0.1 * i, e2e=0.05 if i < 30 else 0.2,
                      error_kind="stream_error" if i in (30, 31, 32, 33) else None) for i in range(100)])
    run.times = {"kill": origin + 3.0, "detected": origin + 4.0, "restart": origin + 4.5, "restarted": origin + 6.0,
                 "restored": origin + 9.0, "recovered": origin + 9.5}
    run.before = Snapshot(origin, {}, {}, {W0: 10.0, W1: 10.0})
    run.after = Snapshot(origin + 10, {}, {}, {W0: 40.0, W1: 80.0})
    run.done_at_kill, run.routed_known, run.restored = 30, True, True
    return failover.judge(run, kill="SIGKILL", at=0.3, max_error_rate=0.01, max_detect_s=2.0, max_recover_s=1.0)


@pytest.fixture
def report() -> dict[str, Any]:
    workers = [FakeWorker(0, W0, {"version": "0.5.23", "max_total_num_tokens": 231120, "model_path": "m"}),
               FakeWorker(1, W1, None)]  # not reachable from here: the gateway's word only
    server = _fake_server(workers, end_health={W0: True, W1: False})
    identity = fleet.identify_fleet(server)
    assert identity is not None
    fleet.refresh_health(server, identity)
    throughput = GateOutcome("throughput", [compare("throughput", "output_throughput", 900.0, ">=", 500.0)],
                             context={"worker_shares": {W0: 0.5, W1: 0.5}, "worker_requests": {W0: 16, W1: 16}})
    tests = [Record("t.py::test_tput", gates=[throughput]),
             Record("t.py::test_failover", outcome="failed", gates=[_failover_outcome(server)])]
    return json_report.build_report(tests, sample.identity(), exitstatus=1, fleet=identity)


def test_the_failover_outcome_gives_each_figure_against_its_limit() -> None:
    server = _fake_server([FakeWorker(0, W0, {}), FakeWorker(1, W1, {})])
    outcome = _failover_outcome(server)
    assert outcome.message().splitlines()[:5] == [
        "sglang failover gate failed: max_error_rate=0.01: measured 0.04 (error_rate); max_recover_s=1.0: measured "
        "5 s (recover_s)",
        "  max_error_rate=0.01: error_rate measured 0.04, required <= 0.01 [load generator (client side, "
        "bench_serving definitions)]: FAILED",
        "  max_detect_s=2.0: detect_s measured 1 s, required <= 2 s [gateway GET /workers and smg_* metrics, polled "
        "every 0.1 s]: ok",
        "  max_recover_s=1.0: recover_s measured 5 s, required <= 1 s [gateway GET /workers and smg_* metrics, polled "
        "every 0.1 s]: FAILED",
        "  worker_restored: measured True, required == True [gateway GET /workers and smg_* metrics, polled every "
        "0.1 s]: ok",
    ]
    assert outcome.context["timeline (s from the load start)"] == (
        "kill 3.00, first error 3.20, last error 3.50, detected 4.00, restart 4.50, restarted 6.00, restored 9.00, "
        "recovered 9.50, load end 10.00")
    assert outcome.context["worker_shares"] == {W0: 0.3, W1: 0.7}  # 30 and 70 routed during the load


def test_json_fleet_section_validates_and_joins_identity_shares_and_failovers(report: dict[str, Any]) -> None:
    assert json_report.validation_errors(report) == []
    assert report["schema_version"] == 2
    section = report["fleet"]
    assert section["gateway"] == {"flavor": "smg", "version": "1.13.0", "url": "http://127.0.0.1:8000",
                                  "mode": "simulator", "launched": True}
    first, second = section["workers"]
    assert (first["sglang_version"], first["max_total_num_tokens"], first["healthy_at_end"]) == ("0.5.23", 231120, True)
    # Not reachable: the gateway's labels give the version; no capacity; the gateway now says it is down.
    assert (second["sglang_version"], second["max_total_num_tokens"], second["healthy_at_end"]) == ("0.5.22", None,
                                                                                                    False)
    assert [(s["gate"], s["by_url"][W0]) for s in section["shares"]] == [("throughput", 0.5), ("failover", 0.3)]
    assert (first["share"], first["share_source"]) == (0.3, "t.py::test_failover")  # the last measurement
    (record,) = section["failovers"]
    assert (record["outcome"], record["detect_s"], record["recover_s"], record["errors"]) == (
        "failed", 1.0, 5.0, {"stream_error": 4})
    assert record["timeline_s"]["kill"] == 3.0 and record["timeline_s"]["cb_open"] is None


def test_a_report_without_the_fleet_key_is_not_a_v2_report(report: dict[str, Any]) -> None:
    old = {k: v for k, v in report.items() if k != "fleet"}
    assert "$: 'fleet' is a required property" in json_report.validation_errors(old)
    broken = json.loads(json.dumps(report))
    broken["fleet"]["workers"][0]["share"] = 1.5
    assert json_report.validation_errors(broken) == ["$.fleet.workers[0].share: 1.5 is greater than the maximum of 1"]


def test_single_server_reports_have_no_fleet() -> None:
    assert fleet.identify_fleet(cast(Any, SimpleNamespace(fleet=None))) is None
    report = json_report.build_report([], None)
    assert report["fleet"] is None and json_report.validation_errors(report) == []
    assert "fleet" not in "\n".join(terminal.render(report))


def test_identity_never_raises_for_a_worker_that_does_not_answer() -> None:
    server = _fake_server([FakeWorker(0, W0, {"boom": 1})])  # reachable, but its /server_info fails
    identity = fleet.identify_fleet(server)
    assert identity is not None and identity["workers"][0]["max_total_num_tokens"] is None
    fleet.refresh_health(server, identity)  # the gateway is gone: the start state stays
    assert identity["workers"][0]["healthy_at_end"] is None


def test_terminal_shows_worker_rows_and_the_timeline_in_80_columns(report: dict[str, Any]) -> None:
    lines = terminal.render(report)
    assert max(len(line) for line in lines) <= 80
    start = lines.index(next(x for x in lines if x.startswith("fleet    ")))
    assert lines[start:start + 4] == [
        "fleet    smg 1.13.0 (launched) at http://127.0.0.1:8000 with 2 workers",
        "    # role     health          SGLang     capacity share url",
        "    0 regular  healthy         0.5.23      231,120   30% http://10.0.0.1:30000",
        "    1 regular  healthy -> DOWN 0.5.22            ?   70% http://10.0.0.2:30000",
    ]
    text = "\n".join(lines)
    assert ("failover t.py::test_failover".ljust(73) + " FAILED\n"
            "  worker 0 SIGKILL: 4 errors (4.0%) [stream_error=4], detected in 1.00 s,\n"
            "    serving again 5.00 s after the restart\n"
            "  timeline: kill 3.00 s, first error 3.20 s, last error 3.50 s, detected 4.00 s,\n"
            "    restarted 6.00 s, recovered 9.50 s, load end 10.00 s") in text


def test_markdown_and_html_hold_the_worker_rows_and_the_timeline(report: dict[str, Any]) -> None:
    md = markdown.render(report)
    assert "**Fleet**: smg 1.13.0 (launched) at http://127.0.0.1:8000 with 2 workers" in md
    assert "| 1 | regular | `http://10.0.0.2:30000` | healthy -> DOWN | 0.5.22 | ? | 70% |" in md
    assert ("| `t.py::test_failover` | 0 (SIGKILL) | 4 errors (4.0%) [stream_error=4], detected in 1.00 s, serving "
            "again 5.00 s after the restart | 3.00 | 3.20 | 3.50 | - | 4.00 | 6.00 | 9.50 | 10.00 |") in md
    page = html.render(report)
    assert "<h2>Fleet</h2>" in page and '<td class="bad">healthy -&gt; DOWN</td>' in page
    assert '<svg id="failover-0"' in page or "failover-0" in page
    assert "seconds from the start of the timed load" in page and "until serving again" in page


INNER = """
import pytest

LOAD = dict(requests=100, concurrency=4, input_len=32, output_len=16)


@pytest.mark.sglang_throughput(**LOAD)
def test_throughput():
    pass


@pytest.mark.sglang_failover(**LOAD, max_error_rate=0.5, max_detect_s=30, max_recover_s=60)
def test_failover():
    pass
"""


def test_a_fleet_session_writes_the_section_everywhere(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    launch = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --enable-metrics"
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", launch,
        "--sglang-gateway", "--health-check-interval-secs 1 --health-failure-threshold 1 --cb-timeout-duration-secs 5 "
        "--policy round_robin",
        "--sglang-report", "r.json", "--sglang-markdown", "r.md", "--sglang-html", "r.html", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    report = json.loads((pytester.path / "r.json").read_text())
    assert json_report.validation_errors(report) == []
    section = report["fleet"]
    assert [(w["index"], w["healthy"], w["healthy_at_end"], w["sglang_version"]) for w in section["workers"]] == [
        (0, True, True, "0.5.23"), (1, True, True, "0.5.23")]
    assert all(isinstance(w["max_total_num_tokens"], int) for w in section["workers"])
    assert [s["gate"] for s in section["shares"]] == ["throughput", "failover"]  # the workers' own and the gateway's
    assert [f["nodeid"] for f in section["failovers"]] == ["test_inner.py::test_failover"]
    result.stdout.fnmatch_lines(["fleet    smg 1.13.0 (launched) at http://127.0.0.1:* with 2 workers",
                                 "    # role     health          SGLang     capacity share url",
                                 "    0 regular  healthy         0.5.23       * *% http://127.0.0.1:*",
                                 "    1 regular  healthy         0.5.23       * *% http://127.0.0.1:*"],
                                consecutive=True)
    md = (pytester.path / "r.md").read_text()
    assert md.count("| regular | `http://127.0.0.1:") == 2 and "**Failover timeline**" in md
    page = (pytester.path / "r.html").read_text()
    assert page.count("<td>regular</td>") == 2 and "failover-0" in page
