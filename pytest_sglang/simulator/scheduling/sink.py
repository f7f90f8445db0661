"""Fast writes of engine output to a streaming HTTP response.

One decode step emits a chunk for every running request. Waking one handler task per request per
token would dominate the CPU cost, so the engine writes directly: ``aiohttp``'s
``StreamResponse.write`` almost never suspends (only when the socket's send buffer is full), so we
drive the coroutine by hand and only fall back to a task when it does suspend; later chunks queue
behind it in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

from aiohttp import web


class Sink:
    """Where a request's bytes go. ``closed`` turns true when the client went away."""

    __slots__ = ("_backlog", "_done", "_pending", "closed", "resp", "send_perf")

    def __init__(self, resp: web.StreamResponse | None) -> None:
        self.resp = resp
        self.closed = False
        self._pending: asyncio.Task[None] | None = None
        self._backlog: list[bytes] = []
        self._done: asyncio.Future[None] | None = None
        #: perf_counter() of each push (ground truth for the trace file).
        self.send_perf: list[float] = []

    def push(self, data: bytes) -> None:
        self.send_perf.append(time.perf_counter())
        if self.closed or self.resp is None:
            return
        if self._pending is not None:
            self._backlog.append(data)
            return
        coro = self.resp.write(data)
        try:
            fut = coro.send(None)
        except StopIteration:
            return
        except Exception:  # client gone (ConnectionResetError, ClientConnectionResetError)
            self.closed = True
            return
        self._pending = asyncio.get_running_loop().create_task(self._resume(coro, fut))

    async def _resume(self, coro: Coroutine[Any, Any, None], fut: Any) -> None:
        try:
            while True:
                if fut is None:
                    await asyncio.sleep(0)
                else:
                    try:
                        await fut
                    except BaseException:
                        pass  # the write coroutine sees the outcome itself when resumed
                fut = coro.send(None)
        except StopIteration:
            pass
        except Exception:
            self.closed = True
        self._pending = None
        if self._backlog and not self.closed:
            data = b"".join(self._backlog)
            self._backlog.clear()
            self.send_perf.pop()  # the re-push below is not a new chunk
            self.push(data)
        if self._pending is None and self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def drained(self) -> None:
        """Wait until every pushed byte has been handed to the transport."""
        while self._pending is not None and not self.closed:
            self._done = asyncio.get_running_loop().create_future()
            await self._done
