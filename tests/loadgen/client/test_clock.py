"""The receive clock: a stream is stamped with the wake-up that delivered its data, not later."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

from pytest_sglang.loadgen.client import clock


def test_stamp_is_the_wake_that_delivered_the_data_not_the_coroutine_resume() -> None:
    a, b = socket.socketpair()
    sent: list[float] = []

    def send_later() -> None:
        time.sleep(0.05)
        sent.append(time.perf_counter())
        b.sendall(b"data: x\n")

    async def main() -> tuple[float, float]:
        reader, writer = await asyncio.open_connection(sock=a)
        wake = clock.stream_clock()
        assert isinstance(wake, clock.WakeSelector)
        mark = wake.count
        threading.Thread(target=send_later).start()
        assert await reader.read(100) == b"data: x\n"
        stamp = wake.stamp(mark, 0.0)
        time.sleep(0.02)  # busy after the read: a perf_counter() stamp taken now would be late
        late = time.perf_counter()
        writer.close()
        return stamp, late

    try:
        stamp, late = clock.run(main())
    finally:
        b.close()
    assert sent[0] <= stamp < sent[0] + 0.01  # generous for a loaded machine, still < the 20 ms
    assert late - stamp >= 0.02


def test_stamp_without_suspension_keeps_the_previous_time() -> None:
    selector = clock.WakeSelector()
    try:
        selector.select(0)
        mark = selector.count
        assert selector.stamp(mark, 12.5) == 12.5
        selector.select(0)
        assert selector.stamp(mark, 12.5) == selector.prev
    finally:
        selector.close()


def test_foreign_loop_falls_back_to_perf_counter() -> None:
    async def main() -> float:
        fallback = clock.stream_clock()
        assert isinstance(fallback, clock.PerfClock)
        return fallback.stamp(0, 0.0)

    before = time.perf_counter()
    assert before <= asyncio.run(main()) <= time.perf_counter()


def test_after_a_long_iteration_the_stamp_is_its_end_never_its_start() -> None:
    selector = clock.WakeSelector()
    try:
        selector.select(0)
        mark = selector.count
        time.sleep(2 * clock.LONG_ITERATION_S)  # the delivering iteration stalls
        selector.select(0)
        assert selector.stamp(mark, 0.0) == selector.entered
        assert selector.entered - selector.prev >= 2 * clock.LONG_ITERATION_S
    finally:
        selector.close()
