"""The aiohttp.web application: routes, auth (§8), error envelopes, access log."""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from pytest_sglang.simulator.disagg import node as pd
from pytest_sglang.simulator.failures.registration import model_info_after
from pytest_sglang.simulator.front import handlers, loads, metrics, profiler, weights
from pytest_sglang.simulator.front.handlers import json_response
from pytest_sglang.simulator.launch import payloads
from pytest_sglang.simulator.model.streams import collect
from pytest_sglang.simulator.scheduling import speculative
from pytest_sglang.simulator.scheduling.request import Request
from pytest_sglang.simulator.scheduling.sink import Sink
from pytest_sglang.simulator.state import STARTING, UNHEALTHY, UP, State

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
EXEMPT = ("/health", "/ready", "/metrics")
ADMIN = (
    "/flush_cache",
    "/hicache/storage-backend",
    "/pause_generation",
    "/continue_generation",
    "/abort_request",
    "/freeze_gc",
    "/start_profile",
    "/stop_profile",
)
STATE: web.AppKey[State] = web.AppKey("state", State)
#: Marks a response sent without a Content-Type header (aiohttp would add application/octet-stream).
BARE = "pytest_sglang.bare"
FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
    "requests, the operation will not be performed.)\n"
)
NEEDS_ADMIN = (
    "This endpoint requires admin API key, but this server was started without one (admin-api-key). "
    "Restart with --admin-api-key to enable."
)


def _bearer_ok(request: web.Request, key: str) -> bool:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())


@web.middleware
async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    a = request.app[STATE].cfg.args
    path = request.path
    if (a.api_key or a.admin_api_key) and request.method != "OPTIONS" and not path.startswith(EXEMPT):
        key = (a.admin_api_key or a.api_key) if path.startswith(ADMIN) else a.api_key
        if key and not _bearer_ok(request, key):
            return json_response({"error": "Unauthorized"}, 401)
    return await handler(request)


@web.middleware
async def envelope(request: web.Request, handler: Handler) -> web.StreamResponse:
    """FastAPI's 404/405 bodies, the uvicorn access log and the http_* metrics."""
    state = request.app[STATE]
    key = (request.path, request.method)
    state.http_requests[key] += 1
    state.http_active[key] += 1
    try:
        resp = await handler(request)
    except web.HTTPNotFound:
        resp = json_response({"detail": "Not Found"}, 404)
    except web.HTTPMethodNotAllowed:
        resp = json_response({"detail": "Method Not Allowed"}, 405)
    finally:
        state.http_active[key] -= 1
    peer = request.transport.get_extra_info("peername") if request.transport else None
    addr = f"{peer[0]}:{peer[1]}" if peer else "127.0.0.1:0"
    state.http_responses[(request.path, str(resp.status), request.method)] += 1
    state.log.access(addr, request.method, request.path_qs, resp.status, resp.reason or "")
    return resp


async def health(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if state.status == STARTING:
        return web.Response(status=503)
    faults = state.cfg.faults
    if faults.slow_health_s:
        await asyncio.sleep(state.cfg.scaled(faults.slow_health_s))
    under_load = faults.production.health_under_load_s
    if under_load and (state.engine.running or state.engine.waiting):  # waits behind long prefills
        await asyncio.sleep(state.cfg.scaled(under_load))
    if request.path == "/health" and not state.health_generation:
        return web.Response(status=200)
    return await _health_generate(state)


async def _health_generate(state: State) -> web.Response:
    """SGLang's loop: submit a 1-token generation, poll every (simulated) second for any output."""
    engine, tic = state.engine, time.perf_counter()
    broken = state.broken() or state.cfg.faults.never_healthy
    if not broken and not engine.running:  # "Skip health check when server is busy"
        req = Request(
            rid="HEALTH_CHECK_" + str(time.time()),
            prompt_ids=[0],
            max_new=1,
            ignore_eos=True,
            stop=[],
            random_seed=0,
            emit=collect,
            sink=Sink(None),
            stream=False,
            endpoint="/health",
            log_metrics=False,
        )
        engine.submit(req)
    deadline = tic + state.cfg.scaled(state.health_timeout_s)
    while True:
        await asyncio.sleep(state.cfg.scaled(1.0))
        if not broken and engine.last_output_perf > tic:
            state.status = UP
            return web.Response(status=200)
        if time.perf_counter() >= deadline:
            state.status = UNHEALTHY
            stamp = time.strftime("%H:%M:%S")
            state.log.always(
                f"Health check failed. Server couldn't get a response from detokenizer for last "
                f"{state.health_timeout_s:g} seconds. tic start time: {stamp}. last_heartbeat time: "
                f"{stamp}"
            )
            return web.Response(status=503)


async def ready(request: web.Request) -> web.Response:
    return web.Response(status=200 if request.app[STATE].status == UP else 503)


async def root(request: web.Request) -> web.Response:
    return json_response("SGLang is running")


def model_unknown(state: State) -> bool:
    """``--sim-fault model-info-after:S``: still within the S seconds when the worker cannot say its model."""
    after = model_info_after(state.cfg.faults.specs)
    return after is not None and time.perf_counter() - state.up_perf < state.cfg.scaled(after)


def _not_ready() -> web.Response:
    return json_response({"error": {"message": "model info is not ready yet", "code": 503}}, 503)


async def server_info(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if model_unknown(state):
        return _not_ready()
    if request.path == "/get_server_info":
        state.log.warning(
            "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
            "Please use '/server_info' instead."
        )
    body = payloads.server_info(
        state.cfg,
        port=state.port,
        argv=state.argv,
        times=state.times,
        last_gen_throughput=state.engine.stats.last_gen_throughput,
    )
    pd.annotate_server_info(state, body)  # a prefill/decode worker's resolved PD fields
    if state.engine.spec is not None:  # avg_spec_accept_length, each DP rank's own
        for rank, item in enumerate(body.get("internal_states") or ()):
            item.update(speculative.server_info_fields(state.engine.spec, rank))
    mode = state.cfg.faults.server_info
    if mode == "not-json":
        return web.Response(text="<html><body>Internal Server Error</body></html>", content_type="text/html")
    if mode == "missing-field":
        del body["max_total_num_tokens"]
    elif mode == "wrong-type":
        body["max_total_num_tokens"] = str(body["max_total_num_tokens"])
    return json_response(body)


async def model_info(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if request.path == "/get_model_info":
        state.log.warning(
            "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
            "Please use '/model_info' instead."
        )
    if model_unknown(state):
        return _not_ready()
    return json_response(pd.annotate_model_info(state, payloads.model_info(state.cfg)))


async def models(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if model_unknown(state):
        return _not_ready()
    body = payloads.models_list(state.cfg, int(time.time()))
    name = request.match_info.get("model")
    if name is None:
        return json_response(body)
    if name == state.cfg.served_model_name:
        return json_response(body["data"][0])
    return json_response(
        {
            "error": {
                "message": f"The model '{name}' does not exist",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
        },
        404,
    )


async def flush_cache(request: web.Request) -> web.Response:
    state = request.app[STATE]
    timeout = float(request.query.get("timeout", "0") or 0)
    deadline = time.perf_counter() + timeout
    while not state.engine.flush():
        if time.perf_counter() >= deadline:
            e = state.engine
            state.log.info(
                f"Cache not flushed because there are pending requests. #queue-req: {len(e.waiting)}, "
                f"#running-req: {len(e.running)}"
            )
            return web.Response(
                text="Timed out waiting for idle state." if timeout else "Flush cache failed.\n", status=400
            )
        await asyncio.sleep(0.05)
    state.log.info("Cache flushed successfully!")
    resp = web.Response(body=FLUSHED.encode())
    resp[BARE] = True  # 0.5.23 sends this body with no Content-Type header at all
    return resp


async def storage_backend(request: web.Request) -> web.Response:
    state = request.app[STATE]
    a = state.cfg.args
    if not a.admin_api_key:
        return json_response({"error": NEEDS_ADMIN}, 400)
    if request.method == "GET":
        return json_response(
            {
                "hicache_storage_backend": state.storage_backend,
                "hicache_storage_backend_extra_config": None,
                "hicache_storage_prefetch_policy": a.hicache_storage_prefetch_policy,
                "hicache_write_policy": a.hicache_write_policy,
            }
        )
    if request.method == "DELETE":
        state.storage_backend = None
        return web.Response(text="HiCache storage backend detached.\n")
    body: dict[str, Any] = await request.json()
    if not a.enable_hierarchical_cache:
        return web.Response(
            text="Failed to attach HiCache storage backend.\nHierarchical cache is not enabled.\n", status=400
        )
    e = state.engine
    if e.running or e.waiting:
        return web.Response(
            text="Failed to attach HiCache storage backend.\nReject attach: scheduler is not idle. "
            f"#queue-req={len(e.waiting)} #running-req={len(e.running)}\n",
            status=400,
        )
    state.storage_backend = str(body.get("hicache_storage_backend"))
    return web.Response(text="HiCache storage backend attached.\n")


async def metrics_endpoint(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if not state.cfg.args.enable_metrics:
        return json_response({"detail": "Not Found"}, 404)
    return web.Response(
        body=pd.metrics_text(request.app, metrics.render(state)).encode(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


async def v1_loads(request: web.Request) -> web.Response:
    return loads.respond(request.app[STATE], request)


async def freeze_gc(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _strip_content_type(request: web.Request, response: web.StreamResponse) -> None:
    if response.get(BARE):
        response.headers.pop("Content-Type", None)


def build_app(state: State) -> web.Application:
    app = web.Application(middlewares=[envelope, auth], client_max_size=64 * 2**20)
    app.on_response_prepare.append(_strip_content_type)
    app[STATE] = state
    r = app.router

    def get(path: str, fn: Handler) -> None:
        r.add_get(path, fn, allow_head=False)  # FastAPI adds no HEAD to GET routes: HEAD -> 405

    for path in ("/health", "/health_generate"):
        get(path, health)
    get("/ready", ready)
    get("/ping", ready)
    r.add_get("/", root)  # the one route with an explicit HEAD
    for path in ("/server_info", "/get_server_info"):
        get(path, server_info)
    for path in ("/model_info", "/get_model_info"):
        get(path, model_info)
    get("/v1/models", models)
    get("/v1/models/{model}", models)
    get("/v1/loads", v1_loads)
    for path in ("/metrics", "/metrics/"):
        get(path, metrics_endpoint)
    for method in ("GET", "POST"):
        r.add_route(method, "/flush_cache", flush_cache)
    for method in ("GET", "PUT", "DELETE"):
        r.add_route(method, "/hicache/storage-backend", storage_backend)
    r.add_post("/freeze_gc", freeze_gc)
    for method in ("POST", "PUT"):
        r.add_route(method, "/generate", lambda q: handlers.generate(q.app[STATE], q))
    r.add_post("/v1/completions", lambda q: handlers.openai(q.app[STATE], q, chat=False))
    r.add_post("/v1/chat/completions", lambda q: handlers.openai(q.app[STATE], q, chat=True))
    pd.install(app, state)  # --disaggregation-mode prefill|decode: bootstrap server, KV hand-off
    weights.install(app, state)  # /weights_checker: checksums of the (simulated) loaded weights
    profiler.install(app, state)  # /start_profile, /stop_profile: a small trace file per window
    return app
