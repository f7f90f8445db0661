"""Prefill-decode disaggregation (``--disaggregation-mode prefill|decode``): the simulator's PD worker.

A gateway in PD mode sends the same request to one prefill and one decode worker with
``bootstrap_host``, ``bootstrap_port`` and ``bootstrap_room`` added, and answers with the decode
worker's response. :class:`PDNode` is installed in the app of a PD worker (:func:`install`) and hooked
into the generation path (``respond.run``): :meth:`PDNode.before` runs before the engine gets a
request (prefill: wait for the decode peer; decode: fetch the KV), :meth:`PDNode.after` when the engine
is done (prefill: send the KV). The sides are :mod:`.prefill` and :mod:`.decode`; the wire is
:mod:`.transfer`; the metrics :mod:`.metrics`; the client-visible failures :mod:`.errors`.
A request without ``bootstrap_room`` is refused with 400 as 0.5.23 refuses it (except on a ``fake``
decode worker, which decodes from an empty KV).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from aiohttp import web

from pytest_sglang.simulator.disagg.config import FAKE_BOOTSTRAP_HOST, PDConfig, overlay_server_info, resolve_pd
from pytest_sglang.simulator.disagg.decode import DecodeSide
from pytest_sglang.simulator.disagg.errors import Failure, error_response, missing_room, stream_error
from pytest_sglang.simulator.disagg.metrics import PDStats, merge
from pytest_sglang.simulator.disagg.prefill import PrefillSide
from pytest_sglang.simulator.failures.pd import PDFaults, parse_pd_faults
from pytest_sglang.simulator.scheduling.request import Request
from pytest_sglang.simulator.state import State

__all__ = ["PDNode", "annotate_model_info", "annotate_server_info", "install", "loads_disaggregation", "metrics_text",
           "node_of"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def bootstrap_fields(body: dict[str, Any], n: int) -> tuple[list[int | None], str | None, object]:
    """Each engine request's room, and the bootstrap host and port (0.5.23's ``_normalize_bootstrap_params``)."""
    room, host, port = body.get("bootstrap_room"), body.get("bootstrap_host"), body.get("bootstrap_port")
    if isinstance(room, list):
        rooms = [_int(r) for r in room][:n]
        rooms += [None] * (n - len(rooms))
    else:
        first = _int(room)
        rooms = [None if first is None else first + i for i in range(n)]
    host = host[0] if isinstance(host, list) and host else host
    port = port[0] if isinstance(port, list) and port else port
    return rooms, host if isinstance(host, str) else None, port


class PDNode:
    """One PD worker's state: its settings, faults, metrics and prefill or decode side."""

    def __init__(self, state: State, pd: PDConfig, faults: PDFaults) -> None:
        cfg = state.cfg
        self.state, self.pd, self.faults = state, pd, faults
        self.stats = PDStats()
        scale = cfg.sim.time_scale
        self.prefill = PrefillSide(pd, faults, self.stats, state.log, scale=scale,
                                   kv_bytes_per_token=cfg.kv_bytes_per_token, weights_seed=cfg.weights_seed) \
            if pd.mode == "prefill" else None
        self.decode = DecodeSide(pd, faults, self.stats, state.log, scale=scale,
                                 own_addr=f"{cfg.args.host}:{state.port}", weights_seed=cfg.weights_seed) \
            if pd.mode == "decode" else None
        self._fake_rooms = itertools.count()

    async def on_startup(self, app: web.Application) -> None:
        if self.prefill is not None:
            a = self.state.cfg.args
            await self.prefill.start(a.host, tp=a.tp_size, dp=a.dp_size, pp=a.pp_size, http_port=self.state.port)

    async def on_cleanup(self, app: web.Application) -> None:
        if self.prefill is not None:
            await self.prefill.stop()
        if self.decode is not None:
            await self.decode.stop()

    async def before(self, request: web.Request, reqs: list[Request]) -> Failure | None:
        """Before the engine: refuse a request without a room, bootstrap (prefill) or receive the KV (decode)."""
        body = await request.json()
        rooms, host, port = bootstrap_fields(body if isinstance(body, dict) else {}, len(reqs))
        if self.pd.backend == "fake":
            rooms = [next(self._fake_rooms) if r is None else r for r in rooms]
        if any(r is None for r in rooms):
            message = missing_room(reqs[0].rid)
            self.state.log.always(message)
            return Failure(message, 400)
        pairs = [(req, r) for req, r in zip(reqs, rooms, strict=True) if r is not None]
        if self.prefill is not None:
            side = self.prefill
            fake = host == FAKE_BOOTSTRAP_HOST
            try:
                results = await asyncio.gather(*(side.bootstrap(req, room, fake=fake) for req, room in pairs))
            except asyncio.CancelledError:  # the client went away while waiting for the decode peer
                for req in reqs:
                    side.forget(req)
                raise
            failure = next((f for f in results if f is not None), None)
            if failure is not None:
                for req in reqs:
                    side.forget(req)
            return failure
        assert self.decode is not None
        decode = self.decode
        results = await asyncio.gather(*(decode.receive(req, room, host, port) for req, room in pairs))
        return next((f for f in results if f is not None), None)

    async def after(self, request: web.Request, reqs: list[Request]) -> Failure | None:
        """After the engine: a prefill worker sends each request's KV before it answers."""
        if self.prefill is None:
            return None
        body = await request.json()
        rooms, host, _ = bootstrap_fields(body if isinstance(body, dict) else {}, len(reqs))
        fake = host == FAKE_BOOTSTRAP_HOST
        side = self.prefill
        results = await asyncio.gather(
            *(side.transfer(req, room, fake=fake) for req, room in zip(reqs, rooms, strict=True) if room is not None)
        )
        return next((f for f in results if f is not None), None)

    async def fail(
        self, request: web.Request, resp: web.StreamResponse | None, reqs: list[Request], failure: Failure
    ) -> web.StreamResponse:
        """Answer a failed request as 0.5.23 does for this endpoint (a response, or an abort in the stream)."""
        if resp is None:
            return error_response(request.path, failure)
        first = reqs[0]
        await resp.write(stream_error(request.path, failure, rid=first.rid, prompt_tokens=len(first.prompt_ids),
                                      arrival=first.arrival))
        await resp.write_eof()
        return resp


PD_NODE: web.AppKey[PDNode] = web.AppKey("pd_node", PDNode)


def install(app: web.Application, state: State) -> None:
    """Make ``app`` a PD worker when the launch says ``--disaggregation-mode prefill|decode``."""
    pd = resolve_pd(state.cfg.args)
    if not pd.enabled:
        return
    node = PDNode(state, pd, parse_pd_faults(state.cfg.faults.specs))
    app[PD_NODE] = node
    if pd.mode == "decode" and not pd.decode_radix:
        state.engine.radix = False  # "Radix cache is disabled for decode server"
    app.on_startup.append(node.on_startup)
    app.on_cleanup.append(node.on_cleanup)


def node_of(request: web.Request) -> PDNode | None:
    """The PD worker behind ``request``'s app (None on a regular server)."""
    return request.app.get(PD_NODE)


def annotate_server_info(state: State, body: dict[str, Any]) -> None:
    overlay_server_info(resolve_pd(state.cfg.args), state.cfg.args, body)


def annotate_model_info(state: State, body: dict[str, Any]) -> dict[str, Any]:
    pd = resolve_pd(state.cfg.args)
    if pd.enabled:
        body["disaggregation_mode"] = pd.mode
    return body


def metrics_text(app: web.Application, text: str) -> str:
    """``/metrics`` with a PD worker's labels and families (unchanged on a regular server)."""
    node = app.get(PD_NODE)
    if node is None:
        return text
    return merge(text, node.pd.mode, node.stats, node.state.cfg.served_model_name)


def loads_disaggregation(request: web.Request) -> dict[str, Any] | None:
    """The ``disaggregation`` section of ``GET /v1/loads`` (0.5.23's ``DisaggregationMetrics``), None if not PD."""
    node = node_of(request)
    if node is None:
        return None
    q, st = node.stats.queues, node.stats
    return {"mode": node.pd.mode, "prefill_bootstrap_queue_reqs": q["num_prefill_bootstrap_queue_reqs"],
            "prefill_inflight_queue_reqs": q["num_prefill_inflight_queue_reqs"],
            "decode_prealloc_queue_reqs": q["num_decode_prealloc_queue_reqs"],
            "decode_transfer_queue_reqs": q["num_decode_transfer_queue_reqs"], "decode_retracted_queue_reqs": 0,
            "kv_transfer_speed_gb_s": st.last_speed_gb_s, "kv_transfer_latency_ms": st.last_latency_ms}
