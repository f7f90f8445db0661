"""``GET|POST /weights_checker``: a checksum of the loaded weights, as SGLang 0.5.23 answers it.

0.5.23 (``srt/entrypoints/http_server.py`` ``check_weights``; ``srt/utils/weight_checker.py``): the body
is an optional ``CheckWeightsReqInput`` (``action`` "checksum" by default, ``skip_tensor_list``,
``selector``). Every TP rank hashes each weight tensor (16 hex digits), hashes the sorted
``name + hash`` pairs into its ``per_gpu_checksum``, and the tokenizer manager hashes the ranks'
``per_gpu_checksum`` in order into ``per_engine_checksum`` (sha256 hex). The answer is
``{"success", "message", "ranks": [{checksums, per_gpu_checksum, parallelism_info: [...]}],
"per_engine_checksum"}``, 200 on success, 400 otherwise.

Here the weights are a function of the model path (as :attr:`SimConfig.weights_seed` says for the
answers): two workers on one path agree, on two paths differ, and the ``corrupt-weights`` fault
changes one tensor. A rank's tensors are its shard, so another TP layout gives other checksums, as
in SGLang. The ``weights-checker:MODE`` fault answers no checksum at all, in one of six ways.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

from aiohttp import web

from pytest_sglang.simulator.front.respond import json_response
from pytest_sglang.simulator.state import State

__all__ = ["install"]

_TENSORS = ("model.embed_tokens.weight", "model.layers.0.self_attn.qkv_proj.weight",
            "model.layers.0.mlp.gate_up_proj.weight", "model.norm.weight", "lm_head.weight")
_ACTIONS = ("checksum", "snapshot", "reset_tensors", "compare")


def _tensor_hash(model_path: str, name: str, tp_rank: int, tp_size: int) -> str:
    return hashlib.sha256(f"{model_path}|{name}|{tp_rank}/{tp_size}".encode()).hexdigest()[:16]


def _overall(checksums: dict[str, str]) -> str:
    # weight_checker.overall_checksum: names in sorted order, each name then its hash
    h = hashlib.sha256()
    for name in sorted(checksums):
        h.update(name.encode())
        h.update(checksums[name].encode())
    return h.hexdigest()


def _rank(state: State, tp_rank: int, dp_rank: int, skip: list[str]) -> dict[str, object]:
    cfg = state.cfg
    tp, pp, dp = cfg.args.tp_size, cfg.args.pp_size, cfg.args.dp_size
    checksums = {n: _tensor_hash(cfg.model_path, n, tp_rank, tp) for n in _TENSORS
                 if not any(s in n for s in skip)}
    if cfg.faults.production.corrupt_weights and "lm_head.weight" in checksums:
        checksums["lm_head.weight"] = _tensor_hash("corrupt:" + cfg.model_path, "lm_head.weight", tp_rank, tp)
    rank = dp_rank * tp + tp_rank
    placement = {"role": "target", "tp_rank": tp_rank, "tp_size": tp, "dp_rank": dp_rank, "dp_size": dp,
                 "pp_rank": 0, "pp_size": pp, "rank": rank, "size": tp * pp * dp}
    return {"checksums": checksums, "per_gpu_checksum": _overall(checksums), "parallelism_info": [placement]}


_HUGE_BYTES = 100 * 10**6


async def _broken(request: web.Request, mode: str) -> web.StreamResponse:
    """``/weights_checker`` answering no checksum, as the ``weights-checker:MODE`` fault asks."""
    if mode == "hang":
        await asyncio.Event().wait()  # until the client gives up (the server cancels the handler)
    if mode == "garbage":
        return web.Response(text="<html><body>502 Bad Gateway</body></html>", content_type="text/html")
    if mode == "unauthorized":
        return json_response({"error": "Unauthorized"}, 401)
    if mode == "wrong-types":
        return json_response({"success": "yes", "per_engine_checksum": ["not", "a", "string"], "ranks": [
            {"checksums": 5, "parallelism_info": "tp0"}]})
    if mode == "failure":
        return json_response({"success": False, "message": "Unsupported action='checksum' on this backend"}, 400)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    chunk = b" " * 2**20
    for _ in range(_HUGE_BYTES // len(chunk)):  # a body no reader should hold whole
        await response.write(chunk)
    return response


async def weights_checker(request: web.Request, state: State) -> web.StreamResponse:
    mode = state.cfg.faults.production.weights_checker
    if mode is not None:
        return await _broken(request, mode)
    raw = await request.read()
    try:
        body = json.loads(raw) if raw.strip() else {}
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return json_response({"detail": [{"type": "model_attributes_type", "loc": ["body"],
                                          "msg": "Input should be a valid dictionary or object"}]}, 422)
    action = body.get("action", "checksum")
    if action != "checksum":
        why = "not simulated" if action in _ACTIONS else f"Unsupported {action=}"
        return json_response({"success": False, "message": f"{why} (the simulator serves action='checksum')"}, 400)
    skip = [s for s in body.get("skip_tensor_list") or () if isinstance(s, str)]
    ranks = [_rank(state, t, d, skip) for d in range(state.cfg.args.dp_size) for t in range(state.cfg.args.tp_size)]
    engine = hashlib.sha256()
    for info in ranks:
        engine.update(str(info["per_gpu_checksum"]).encode())
    message = " | ".join("Success." for _ in range(state.cfg.args.dp_size))
    return json_response({"success": True, "message": message, "ranks": ranks,
                          "per_engine_checksum": engine.hexdigest()})


def install(app: web.Application, state: State) -> None:
    for method in ("GET", "POST"):
        app.router.add_route(method, "/weights_checker", lambda q: weights_checker(q, state))
