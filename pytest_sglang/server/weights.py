"""What weights a server loaded: SGLang 0.5.23's ``/weights_checker`` checksum, read and summarised.

``GET /weights_checker`` (no body: ``action="checksum"``) makes every TP rank hash its weight tensors
and answers ``per_engine_checksum`` (sha256 over the ranks' ``per_gpu_checksum``) with one ``ranks``
entry per rank (``parallelism_info``: role, tp/dp/pp rank and size). A rank hashes its own shard, so
two servers can only be compared when their layouts (:attr:`WeightsChecksum.layout`) match.

Servers older than the route answer 404 (405 on a gateway-style proxy); :func:`read_weights` then
returns why in words, and the caller says the weights were not compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from pytest_sglang.errors import SGLangError
from pytest_sglang.server.handle import SGLangServer

__all__ = ["WEIGHTS_TIMEOUT_S", "WeightsChecksum", "parse_weights", "read_weights"]

#: Hashing every tensor of a large model takes seconds on a GPU (and much longer on CPU).
WEIGHTS_TIMEOUT_S = 120.0
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
    tensors = sum(len(r.get("checksums") or {}) for r in ranks if isinstance(r, dict))
    return WeightsChecksum(checksum, _layout(ranks), tensors)


def read_weights(server: SGLangServer, timeout_s: float = WEIGHTS_TIMEOUT_S) -> WeightsChecksum | str:
    """``GET /weights_checker`` on ``server``: the checksum, or in words why it was not read."""
    try:
        with server.client(timeout=httpx.Timeout(timeout_s, connect=5.0), max_body_bytes=_MAX_BODY) as client:
            response = client.get("/weights_checker")
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
