"""What weights a server loaded: SGLang 0.5.23's ``/weights_checker`` checksum, read and summarised.

``GET /weights_checker`` (no body: ``action="checksum"``) makes every TP rank hash its weight tensors
and answers ``per_engine_checksum`` (sha256 over the ranks' ``per_gpu_checksum``) with one ``ranks``
entry per rank (``parallelism_info``: role, tp/dp/pp rank and size). A rank hashes its own shard, so
two servers can only be compared when their layouts (:attr:`WeightsChecksum.layout`) match.

Servers older than the route answer 404 (405 on a gateway-style proxy); :func:`read_weights` then
returns why in words, and the caller says the weights were not compared. So it does for every other
answer that holds no checksum (an error status, a body that is not JSON, too large or of the wrong
shape, ``success: false``) and for a route that does not answer within :data:`WEIGHTS_TIMEOUT_S`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from pytest_sglang.errors import SGLangError
from pytest_sglang.server.client import ResponseTooLarge, deadline_in, format_bytes
from pytest_sglang.server.handle import SGLangServer

__all__ = ["WEIGHTS_TIMEOUT_S", "WeightsChecksum", "parse_weights", "read_weights"]

#: The whole answer must arrive within this: SGLang 0.5.23 hashes each rank's tensors on its GPU (a
#: triton kernel), seconds even for a large model, and a hung route must not hold the gate for minutes.
WEIGHTS_TIMEOUT_S = 30.0
#: One 16-hex-digit hash per tensor per rank: a 1,000-tensor model on 16 ranks is ~1.5 MB.
_MAX_BODY = 32 * 2**20


@dataclass(frozen=True)
class WeightsChecksum:
    """One server's ``per_engine_checksum`` and the rank layout it was computed over."""

    checksum: str
    #: ``tp2 pp1 dp1 (target)``: checksums compare only between equal layouts
    layout: str
    tensors: int

    def short(self) -> str:
        return self.checksum[:16]


def _layout(ranks: list[Any]) -> str:
    infos = [p for r in ranks if isinstance(r, dict) for p in (r.get("parallelism_info") or [])
             if isinstance(p, dict)]
    if not infos:
        return "unknown layout"
    first = infos[0]
    roles = sorted({str(p.get("role", "target")) for p in infos})
    return (f"tp{first.get('tp_size', '?')} pp{first.get('pp_size', '?')} dp{first.get('dp_size', '?')} "
            f"({', '.join(roles)})")


def parse_weights(body: object) -> WeightsChecksum | str:
    """The checksum from a ``/weights_checker`` JSON body, or why there is none."""
    if not isinstance(body, dict):
        return "/weights_checker did not answer a JSON object"
    if body.get("success") is not True:
        return f"/weights_checker answered success={body.get('success')!r}: {str(body.get('message'))[:200]}"
    checksum = body.get("per_engine_checksum")
    if not isinstance(checksum, str) or not checksum:
        return "/weights_checker answered no per_engine_checksum (no rank returned a payload)"
    listed = body.get("ranks")
    ranks: list[Any] = listed if isinstance(listed, list) else []
    tensors = sum(len(r["checksums"]) for r in ranks if isinstance(r, dict) and isinstance(r.get("checksums"), dict))
    return WeightsChecksum(checksum, _layout(ranks), tensors)


def read_weights(server: SGLangServer, timeout_s: float = WEIGHTS_TIMEOUT_S) -> WeightsChecksum | str:
    """``GET /weights_checker`` on ``server``: the checksum, or in words why it was not read."""
    try:
        with server.client(timeout=httpx.Timeout(timeout_s, connect=5.0), max_body_bytes=_MAX_BODY) as client:
            response = client.get("/weights_checker", extensions=deadline_in(timeout_s))
    except httpx.TimeoutException:
        return f"GET /weights_checker did not answer within {timeout_s:g} s (the limit per request)"
    except ResponseTooLarge:
        return f"GET /weights_checker answered more than {format_bytes(_MAX_BODY)} (reading stopped there)"
    except (httpx.HTTPError, SGLangError) as exc:
        return f"GET /weights_checker failed: {type(exc).__name__}"
    if response.status_code in (404, 405):
        return f"GET /weights_checker answered {response.status_code} (not served: SGLang before 0.5.23?)"
    if response.status_code in (401, 403):
        return (f"GET /weights_checker answered {response.status_code} (an admin route: give the admin API key "
                "to read it)")
    try:
        body = response.json()
    except ValueError:
        return f"GET /weights_checker answered {response.status_code}, not JSON"
    return parse_weights(body)
