"""Start-up progress in a CI log (no tty): one line per phase that lasts, a heartbeat, never a line per shard."""

from __future__ import annotations

import threading
import time

from pytest_sglang.server.phases import PhaseSpan, StartupReport
from pytest_sglang.server.progress import TerminalProgress


def _state(phase: str, shard: int | None = None) -> StartupReport:
    report = StartupReport(phases=[PhaseSpan("launching", 0.0, 0.1), PhaseSpan(phase, 0.1)])
    if shard is not None:
        report.shards, report.shard_percent = (shard, 64), shard * 100 // 64
    return report


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self.lock:
            self.lines.append(line)


def test_a_log_gets_one_line_for_64_shards() -> None:
    lines = _Lines()
    progress = TerminalProgress(lines, tty=False, settle_s=0.05)
    for shard in range(1, 65):
        progress.update(_state("loading weights", shard))
    time.sleep(0.3)
    assert len(lines.lines) == 1 and "loading weights" in lines.lines[0]


def test_a_phase_over_before_it_settles_gets_no_line() -> None:
    lines = _Lines()
    progress = TerminalProgress(lines, tty=False, settle_s=0.2)
    progress.update(_state("allocating KV cache"))
    progress.update(_state("capturing CUDA graphs"))
    time.sleep(0.5)
    assert [line.split("] ", 1)[1] for line in lines.lines] == ["capturing CUDA graphs"]
    progress.done(StartupReport(ready_s=1.0))
    assert lines.lines[-1].startswith("SGLang ready in")


def test_a_long_phase_gets_a_heartbeat() -> None:
    lines = _Lines()
    progress = TerminalProgress(lines, tty=False, settle_s=0.0, heartbeat_s=0.1)
    progress.update(_state("loading weights", 1))
    time.sleep(0.15)
    progress.update(_state("loading weights", 2))
    time.sleep(0.05)
    assert len(lines.lines) == 2 and "(2/64 shards)" in lines.lines[1]


def test_a_terminal_still_sees_every_change() -> None:
    lines = _Lines()
    progress = TerminalProgress(lines, tty=True)
    for shard in range(1, 5):
        progress.update(_state("loading weights", shard))
    assert len(lines.lines) == 4
