"""``--sim-fault leak:MB_PER_MIN``: the simulator's resident memory really grows at that rate.

A soak gate samples a launched server's RSS with psutil, so the leak must be real memory, not a number
in a payload: every :data:`STEP_S` seconds the simulator maps ``MB_PER_MIN x STEP_S / 60`` more
megabytes (1 MB = 10^6 bytes, as the gate counts) and writes every page, so the kernel commits it and
RSS counts it. The clock is the wall clock, not ``--sim-time-scale``: RSS growth is measured in real
minutes. The total is capped (:func:`cap_bytes`) so a simulator left running cannot eat the host;
reaching the cap is logged and the leak stops there.
"""

from __future__ import annotations

import asyncio
import mmap
from collections.abc import Callable

import psutil

STEP_S = 0.5
#: The most a leak may hold: 1 GB, or a quarter of the memory available at start if that is less.
MAX_LEAK_BYTES = 1_000_000_000
_MB = 1_000_000
_PAGE = mmap.PAGESIZE


def cap_bytes() -> int:
    """The most this process may leak: :data:`MAX_LEAK_BYTES` or a quarter of the available memory."""
    return min(MAX_LEAK_BYTES, psutil.virtual_memory().available // 4)


class Leak:
    """Memory mapped and touched at ``mb_per_min``, held for the life of the process, up to ``cap``."""

    def __init__(self, mb_per_min: float, cap: int) -> None:
        self.rate_bytes_s = mb_per_min * _MB / 60.0
        self.cap = cap
        self.held = 0
        self._maps: list[mmap.mmap] = []
        self._owed = 0.0  # bytes due but not yet mapped (a step smaller than a page carries over)

    def step(self, seconds: float) -> bool:
        """Leak ``seconds`` worth; False once the cap is reached (nothing more is ever mapped)."""
        self._owed += self.rate_bytes_s * seconds
        size = min(int(self._owed) // _PAGE * _PAGE, self.cap - self.held)
        if size > 0:
            chunk = mmap.mmap(-1, size)
            for offset in range(0, size, _PAGE):  # one byte a page commits the page
                chunk[offset] = 1
            self._maps.append(chunk)
            self.held += size
            self._owed -= size
        return self.held < self.cap

    def release(self) -> None:
        """Unmap everything (tests only; the simulator holds its leak until it exits)."""
        while self._maps:
            self._maps.pop().close()
        self.held = 0


async def run_leak(mb_per_min: float, log: Callable[[str], None]) -> None:
    """Leak for ever (until cancelled), logging the start and the cap."""
    leak = Leak(mb_per_min, cap_bytes())
    log(f"[sim] --sim-fault leak:{mb_per_min:g}: leaking {mb_per_min:g} MB of host memory a minute "
        f"(capped at {leak.cap / _MB:,.0f} MB)")
    loop = asyncio.get_running_loop()
    last = loop.time()
    while True:
        await asyncio.sleep(STEP_S)
        now = loop.time()
        if not leak.step(now - last):
            log(f"[sim] --sim-fault leak: reached the cap of {leak.cap / _MB:,.0f} MB; the leak stops here")
            await asyncio.Event().wait()  # hold the memory; cancelled at shutdown
        last = now
