"""The app's middleware: API-key auth (§8), FastAPI's 404/405 bodies, the access log and the http_* counts."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web

from pytest_sglang.simulator.front.respond import json_response
from pytest_sglang.simulator.state import State

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
