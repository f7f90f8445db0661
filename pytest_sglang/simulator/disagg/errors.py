"""How a prefill-decode failure reaches the client, per endpoint, as SGLang 0.5.23 sends it.

The scheduler aborts the request with a status (``prepare_abort(req, message, status_code)``); the
tokenizer manager raises ``ValueError`` for 400 and ``HTTPException`` otherwise when not streaming,
and streams the abort chunk when streaming. Recorded on a real 0.5.23 PD pair on CPU:

====================  ===================================================  =======================================
endpoint              not streamed                                         streamed (HTTP 200)
====================  ===================================================  =======================================
/generate 400         ``{"error":{"message":M}}``                           chunk with ``finish_reason`` abort, [DONE]
/generate 500         ``{"object":"error","message":M,"type":"500",...}``   chunk with ``finish_reason`` abort, [DONE]
OpenAI 400            ``{"object":"error",...,"type":"BadRequestError"}``   ``{"error": {..."type": "BAD_REQUEST"}}``
OpenAI 500            ``{"object":"error",...,"type":"500",...}``           ``{"error": {..."INTERNAL_SERVER_ERROR"}}``
====================  ===================================================  =======================================
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web

from pytest_sglang.simulator.model.streams import DONE, dumps

JSON_HEADERS = {"Content-Type": "application/json"}
#: ``KVTransferError``'s reason when the failing side recorded none (an injected poll failure).
UNKNOWN_REASON = "Failed due to an unknown reason from another rank"


@dataclass(frozen=True)
class Failure:
    """A request the PD layer aborts: SGLang's message and HTTP status."""

    message: str
    status: int = 500


def _envelope(message: str, err_type: str, status: int) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": status}


def error_response(path: str, failure: Failure) -> web.Response:
    """The non-streamed answer."""
    if path == "/generate":
        body: Any = ({"error": {"message": failure.message}} if failure.status == 400
                     else _envelope(failure.message, str(failure.status), failure.status))
    else:
        err_type = "BadRequestError" if failure.status == 400 else str(failure.status)
        body = _envelope(failure.message, err_type, failure.status)
    return web.Response(body=dumps(body).encode(), status=failure.status, headers=JSON_HEADERS)


def stream_error(path: str, failure: Failure, *, rid: str, prompt_tokens: int, arrival: float) -> bytes:
    """The streamed answer: one abort chunk, then ``[DONE]``."""
    if path != "/generate":
        body = {"error": _envelope(failure.message, HTTPStatus(failure.status).name, failure.status)}
        return f"data: {json.dumps(body)}\n\n".encode() + DONE
    finish = {"type": "abort", "message": failure.message, "status_code": failure.status, "err_type": None}
    meta = {
        "id": rid,
        "finish_reason": finish,
        "prompt_tokens": prompt_tokens,
        "weight_version": "default",
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "weight_versions": [{"version": "default", "start": 0, "end": 0}],
        "cached_tokens_details": None,
        "dp_rank": None,
        "e2e_latency": max(0.0, time.time() - arrival),
    }
    return b"data: " + dumps({"text": "", "output_ids": [], "meta_info": meta}).encode() + b"\n\n" + DONE


def kv_transfer_error(room: int, reason: str) -> str:
    """``str(KVTransferError)``."""
    return f"KVTransferError(bootstrap_room={room}): {reason}"


def handshake_failed(rid: str, room: int, reason: str) -> str:
    return (f"Decode handshake failed for request rank=0 decode_req.req.rid={rid!r} "
            f"decode_req.req.bootstrap_room={room} with exception {kv_transfer_error(room, reason)}")


def decode_transfer_failed(rid: str, room: int, reason: str) -> str:
    return (f"Decode transfer failed for request rank=0 decode_req.req.rid={rid!r} "
            f"decode_req.req.bootstrap_room={room} with exception {kv_transfer_error(room, reason)}")


def prefill_failed(stage: str, rid: str, room: int, reason: str) -> str:
    """``stage``: "bootstrap" (the decode never bootstrapped) or "transfer"."""
    return (f"Prefill {stage} failed for request rank=0 req.rid={rid!r} req.bootstrap_room={room} "
            f"with exception {kv_transfer_error(room, reason)}")


def missing_room(rid: str) -> str:
    return f"Invalid request: Disaggregated request received without bootstrap room id. req.rid={rid!r}"
