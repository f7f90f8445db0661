"""The fleet's start-up display (pytest_sglang/fleet/progress.py): per worker up to 4, one summary above."""

from __future__ import annotations

import re
import threading

from pytest_sglang.fleet.progress import COMPACT_ABOVE, FleetProgress
from pytest_sglang.server.phases import PhaseSpan, StartupReport

STAMP = re.compile(r"^\[sglang \d+(\.\d)?s\] ")


def _state(*phases: str, kv: int | None = None) -> StartupReport:
    return StartupReport(phases=[PhaseSpan(name, float(i)) for i, name in enumerate(("launching", *phases))],
                         kv_tokens=kv)


def _ready() -> StartupReport:
    report = _state("loading weights", "ready", kv=4096)
    report.ready_s, report.max_total_num_tokens = 2.0, 4096
    return report


def _bare(lines: list[str]) -> list[str]:
    assert all(STAMP.match(line) for line in lines), lines
    return [STAMP.sub("", line) for line in lines]


def test_four_workers_get_a_line_each() -> None:
    assert COMPACT_ABOVE == 4
    lines: list[str] = []
    fleet = FleetProgress(lines.append, 4)
    sinks = [fleet.for_worker(i, 31000 + i) for i in range(4)]
    for sink in sinks:
        sink.update(_state("loading weights"))
    sinks[2].update(_state("loading weights"))  # unchanged: no new line within the heartbeat
    sinks[0].update(_state("loading weights", "ready"))  # "ready" waits for done()
    sinks[0].done(_ready())
    sinks[1].note("restarting")
    assert _bare(lines) == [
        "worker 0 (:31000) loading weights", "worker 1 (:31001) loading weights",
        "worker 2 (:31002) loading weights", "worker 3 (:31003) loading weights",
        "worker 0 (:31000) SGLang ready in 2.0s (max_total_num_tokens=4,096)",
        "worker 1 (:31001) restarting"]


def test_heartbeat_repeats_an_unchanged_phase() -> None:
    lines: list[str] = []
    fleet = FleetProgress(lines.append, 2, heartbeat_s=0.0)
    sink = fleet.for_worker(0, 31000)
    sink.update(_state("capturing CUDA graphs", kv=61472))
    sink.update(_state("capturing CUDA graphs", kv=61472))
    assert _bare(lines) == ["worker 0 (:31000) capturing CUDA graphs | KV pool 61,472 tokens"] * 2


def test_roles_show_in_the_label() -> None:
    lines: list[str] = []
    fleet = FleetProgress(lines.append, 2)
    fleet.for_worker(0, 31000, "prefill").update(_state("warming up"))
    fleet.for_worker(1, 31001, "decode").note("gave up")
    assert _bare(lines) == ["worker 0 (prefill :31000) warming up", "worker 1 (decode :31001) gave up"]


def test_five_workers_get_one_summary_line() -> None:
    lines: list[str] = []
    fleet = FleetProgress(lines.append, 5)
    sinks = [fleet.for_worker(i, 31000 + i) for i in range(5)]
    for sink in sinks:
        sink.update(_state("loading weights"))
    sinks[4].update(_state("loading weights"))  # same summary: nothing written
    sinks[0].done(_ready())
    bare = _bare(lines)
    assert bare[:5] == ["workers: 4 starting, 1 loading weights", "workers: 3 starting, 2 loading weights",
                        "workers: 3 loading weights, 2 starting", "workers: 4 loading weights, 1 starting",
                        "workers: 5 loading weights"]
    assert bare[5] == "workers: 4 loading weights, 1 ready"
    assert not any(line.startswith("worker ") for line in bare)


def test_compact_summary_is_not_repeated_after_a_worker_is_ready() -> None:
    lines: list[str] = []
    fleet = FleetProgress(lines.append, 5)
    sinks = [fleet.for_worker(i, 31000 + i) for i in range(5)]
    for sink in sinks:
        sink.update(_state("loading weights"))
    sinks[0].done(_ready())
    sinks[1].update(_state("loading weights"))  # nothing changed since the done line
    bare = _bare(lines)
    assert bare[-1] != bare[-2], bare[-2:]


def test_lines_from_many_threads_stay_whole() -> None:
    lines: list[str] = []
    fleet = FleetProgress(lines.append, 8, heartbeat_s=0.0)

    def report(i: int) -> None:
        sink = fleet.for_worker(i, 31000 + i)
        for _ in range(50):
            sink.note("x" * 200)

    threads = [threading.Thread(target=report, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(lines) == 400
    assert all(re.fullmatch(r"worker \d \(:3100\d\) x{200}", line) for line in _bare(lines))
