"""A client that disconnects mid-stream frees its slot: ``sglang:num_running_reqs`` returns to 0.

SGLang aborts a request when its client goes away; a leak here (sglang#11970 was one, in the token
allocator) keeps the slot and its KV cache until the server is restarted. SGLang 0.5.23 republishes
the running-requests gauge as soon as it disagrees with the idle scheduler (``_maybe_log_idle_metrics``),
so an idle server reads 0 promptly.
"""

from __future__ import annotations

import time

from pytest_sglang.correctness import http
from pytest_sglang.correctness.context import ROUTES, CheckContext
from pytest_sglang.correctness.http import StreamReply
from pytest_sglang.correctness.result import CheckReport, Unsupported
from pytest_sglang.sglang import metrics_text

GAUGE = "sglang:num_running_reqs"
POLL_S = 0.1
#: Chunks read before the client goes away (the request is surely running by then).
CHUNKS_BEFORE_DISCONNECT = 3
#: Output tokens asked for: far more than arrive before the disconnect.
LONG_OUTPUT = 4096


def running(ctx: CheckContext) -> float | None:
    """The server's running requests now (the gauge summed over ranks, and over a fleet's workers)."""
    if not ctx.metrics_clients:
        return _running(ctx.get("/metrics"))
    values = [_running(http.get(c, "/metrics", timeout_s=ctx.settings.request_timeout_s)) for c in ctx.metrics_clients]
    return None if any(v is None for v in values) else sum(v or 0.0 for v in values)


def _running(reply: http.Reply) -> float | None:
    if reply.status == 404:
        raise Unsupported("/metrics answers 404: the server runs without --enable-metrics")
    if reply.status != 200:
        return None
    try:
        return metrics_text.value(metrics_text.parse(reply.text), GAUGE)
    except ValueError:
        return None


def wait_idle(ctx: CheckContext, timeout_s: float) -> tuple[float | None, float]:
    """Poll until no request runs or ``timeout_s`` passes: (last value, seconds waited)."""
    start = time.monotonic()
    value = running(ctx)
    while value != 0 and time.monotonic() - start < timeout_s:
        time.sleep(POLL_S)
        value = running(ctx)
    return value, time.monotonic() - start


def check_disconnect(ctx: CheckContext, repeats: int = 2) -> CheckReport:
    """Streams cut off after a few chunks leave ``num_running_reqs`` at 0 within the deadline."""
    report = CheckReport("client disconnect frees its slot")
    limit = ctx.settings.disconnect_timeout_s
    before, _ = wait_idle(ctx, limit)
    if before is None:
        raise Unsupported(f"/metrics has no {GAUGE} gauge")
    if not report.expect(before == 0, f"{GAUGE} is {before:g} before the check (after {limit:g} s of waiting)"):
        return report
    max_tokens = min(LONG_OUTPUT, (ctx.features.context_length or LONG_OUTPUT * 2) // 2)
    for n in range(repeats):
        body = ctx.body("chat", n, max_tokens=max_tokens, ignore_eos=True)
        reply = ctx.stream(ROUTES["chat"], body, until=_enough)
        if not report.expect(len(reply.events) >= CHUNKS_BEFORE_DISCONNECT and reply.status == 200,
                             f"disconnect {n}: the stream did not get going: {reply.describe()}"):
            continue
        after, waited = wait_idle(ctx, limit)
        report.expect(after == 0, f"disconnect {n}: {GAUGE} is still {after} {waited:.1f} s after the client went "
                                  "away (the slot is not freed)")
        report.figures[f"freed after s (#{n})"] = round(waited, 2)
    return report


def _enough(reply: StreamReply) -> bool:
    return len(reply.events) >= CHUNKS_BEFORE_DISCONNECT
