"""The KV hand-off between a prefill and a decode simulator, over HTTP on the prefill's bootstrap port.

Real SGLang runs an aiohttp bootstrap server on the prefill's ``--disaggregation-bootstrap-port``
(``CommonKVBootstrapServer``: ``GET /route``, ``GET /health``) and moves the KV itself with the
transfer backend. The simulator serves the same two routes and carries the "KV" (what the decode
worker needs to continue exactly as one server would: the prompt ids, the prefill's cached-token
counts, the checksum) through one more route, ``POST /sim/kv/{room}``: the decode worker registers
for a room and long-polls until the prefill worker has computed and "transferred" it.

:class:`RoomStore` is the prefill side's table (room -> :class:`Room`); :class:`KVClient` the
decode side's HTTP client.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from pytest_sglang.simulator.disagg.config import PDConfig

KV_PATH = "/sim/kv/{room}"


@dataclass
class Room:
    """One request's hand-off, keyed by its ``bootstrap_room``."""

    room: int
    created: float = field(default_factory=time.perf_counter)
    #: the decode worker that registered ("host:port"), and when
    decode: str | None = None
    registered: float = 0.0
    #: set once the decode worker registered (the prefill's bootstrap wait ends)
    bootstrapped: asyncio.Event = field(default_factory=asyncio.Event)
    #: set when the KV was transferred (``kv``) or the transfer failed (``failure``)
    concluded: asyncio.Event = field(default_factory=asyncio.Event)
    kv: dict[str, Any] | None = None
    failure: str | None = None


class RoomStore:
    """The prefill worker's rooms; entries expire ``ttl_s`` after their last use."""

    def __init__(self, ttl_s: float) -> None:
        self.rooms: dict[int, Room] = {}
        self.ttl_s = ttl_s

    def get(self, room: int) -> Room:
        self._expire()
        entry = self.rooms.get(room)
        if entry is None:
            entry = self.rooms[room] = Room(room)
        return entry

    def conclude(self, room: int, *, kv: dict[str, Any] | None = None, failure: str | None = None) -> None:
        entry = self.get(room)
        entry.kv, entry.failure = kv, failure
        entry.concluded.set()

    def drop(self, room: int) -> None:
        self.rooms.pop(room, None)

    def _expire(self) -> None:
        now = time.perf_counter()
        for key in [k for k, r in self.rooms.items() if now - r.created > self.ttl_s]:
            del self.rooms[key]


def prefill_info(pd: PDConfig, *, tp_size: int, dp_size: int, pp_size: int, http_port: int) -> dict[str, Any]:
    """``GET /route`` with every rank -1: 0.5.23's ``PrefillServerInfo`` the decode side checks."""
    return {
        "attn_tp_size": tp_size,
        "attn_cp_size": 1,
        "dp_size": dp_size,
        "pp_size": pp_size,
        "page_size": pd.page_size,
        "kv_cache_dtype": pd.kv_cache_dtype,
        "follow_bootstrap_room": True,
        "enable_dsa_cache_layer_split": False,
        "enable_kv_cache_sharding": False,
        "prefill_http_port": http_port,
        "decode_allocation_policy": "early",
    }


def bootstrap_app(store: RoomStore, info: dict[str, Any], max_wait_s: float) -> web.Application:
    """The prefill's bootstrap server: ``/health``, ``/route`` and the simulator's KV route.

    ``POST /sim/kv/{room}`` ``{"decode": "host:port", "wait_s": S}`` registers the decode worker
    for the room and waits up to S seconds (at most ``max_wait_s``) for the transfer's outcome.
    """

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def route(request: web.Request) -> web.Response:
        names = ("prefill_dp_rank", "prefill_cp_rank", "target_tp_rank", "target_pp_rank")
        values = [request.query.get(n) for n in names]
        if not all(values):
            return web.Response(text="Missing inputs for bootstrap server.", status=400)
        return web.json_response(info)

    async def kv(request: web.Request) -> web.Response:
        try:
            room = int(request.match_info["room"])
            body = await request.json()
            wait_s = min(max_wait_s, max(0.0, float(body.get("wait_s", max_wait_s))))
        except (ValueError, TypeError, AttributeError):
            return web.Response(text="bad room or body", status=400)
        entry = store.get(room)
        if entry.decode is None:
            entry.decode, entry.registered = str(body.get("decode", "")), time.perf_counter()
            entry.bootstrapped.set()
        try:
            await asyncio.wait_for(entry.concluded.wait(), wait_s)
        except asyncio.TimeoutError:
            return web.json_response({"status": "pending"})
        store.drop(room)
        if entry.failure is not None:
            return web.json_response({"status": "failed", "reason": entry.failure})
        return web.json_response({"status": "ready", "kv": entry.kv})

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_get("/health", health)
    app.router.add_get("/route", route)
    app.router.add_post(KV_PATH, kv)
    return app


class Unreachable(Exception):
    """The prefill's bootstrap server did not answer (refused, reset, timed out)."""


class KVClient:
    """The decode worker's side: fetch the prefill's parallel info, then long-poll a room."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self.info: dict[str, dict[str, Any]] = {}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def parallel_info(self, addr: str) -> dict[str, Any]:
        """0.5.23's ``try_ensure_parallel_info``: one GET, cached per bootstrap address."""
        if addr in self.info:
            return self.info[addr]
        url = (f"http://{addr}/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1"
               "&target_pp_rank=-1")
        try:
            async with self._client().get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
                if resp.status != 200:
                    raise Unreachable(f"Failed to get prefill server info: {resp.status}, {await resp.text()}")
                data: dict[str, Any] = await resp.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise Unreachable(f"Error fetching prefill server info from bootstrap: {exc}") from None
        self.info[addr] = data
        return data

    def forget(self, addr: str) -> None:
        self.info.pop(addr, None)

    async def poll(self, addr: str, room: int, decode: str, wait_s: float) -> dict[str, Any]:
        """One long poll of ``room``: ``{"status": "pending"|"ready"|"failed", ...}``."""
        url = f"http://{addr}{KV_PATH.format(room=room)}"
        try:
            async with self._client().post(
                url, json={"decode": decode, "wait_s": wait_s}, timeout=aiohttp.ClientTimeout(total=wait_s + 5)
            ) as resp:
                if resp.status != 200:
                    raise Unreachable(f"bootstrap server answered {resp.status}")
                data: dict[str, Any] = await resp.json()
                return data
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise Unreachable(str(exc) or type(exc).__name__) from None
