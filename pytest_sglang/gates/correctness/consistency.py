"""``sglang_fleet(consistent=True)``: every worker runs the same SGLang, model and launch configuration.

Each worker's own ``/server_info`` (the resolved launch arguments, reference §2.2) is compared field by
field over :data:`FIELDS`. What a request's answer depends on (:data:`IDENTITY`: version, model,
weights, dtype, quantization, context length, parsers, ...) must match on every worker; the serving
configuration (:data:`PER_ROLE`: parallelism, memory, scheduling, hierarchical cache, ...) must match
between workers of the same role, because a PD fleet's prefill and decode workers may differ on
purpose. A worker this machine cannot reach is compared on what the gateway lists about it (smg 1.x
``labels``: version, model_path, tp/dp/pp size; sglang-router 0.3.x ``metadata``: model_path, tp/dp
size), and the fields it does not list are named as not checked. A failure shows a table of the
differing fields only, one column per worker.

The weights themselves are compared too (:data:`WEIGHTS`): each reachable worker's
``/weights_checker`` ``per_engine_checksum`` (SGLang 0.5.23, :mod:`pytest_sglang.server.weights`),
between workers whose rank layout (tp/pp/dp) is the same, since each rank hashes its own shard. The
workers are read at once, each within :data:`~pytest_sglang.server.weights.WEIGHTS_TIMEOUT_S`. A worker
whose route gives no checksum (404, 401, a hang, a body that is not one) is a line of the outcome's
``unchecked``: every report shows it, and ``--sglang-strict`` fails it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_sglang.errors import SGLangError
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.server.weights import WeightsChecksum, read_weights

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import WorkerHandle

__all__ = ["FIELDS", "IDENTITY", "PER_ROLE", "WEIGHTS", "WorkerView", "compare_workers", "differing", "table", "views"]

#: Compared across every worker: what the answer to a request depends on.
IDENTITY = (
    "version", "model_path", "served_model_name", "tokenizer_path", "revision", "weight_version", "load_format",
    "dtype", "quantization", "kv_cache_dtype", "context_length", "page_size", "chat_template", "reasoning_parser",
    "tool_call_parser", "enable_lora", "lora_paths", "speculative_algorithm", "speculative_draft_model_path",
    "disaggregation_transfer_backend",
)
#: Compared between workers of the same role (regular, prefill, decode): how each one serves.
PER_ROLE = (
    "tp_size", "dp_size", "pp_size", "ep_size", "nnodes", "enable_dp_attention", "mem_fraction_static",
    "max_total_tokens", "max_running_requests", "max_queued_requests", "chunked_prefill_size", "max_prefill_tokens",
    "schedule_policy", "disable_radix_cache", "attention_backend", "sampling_backend", "grammar_backend",
    "enable_hierarchical_cache", "hicache_ratio", "hicache_size", "hicache_write_policy", "hicache_io_backend",
    "hicache_mem_layout", "hicache_storage_backend", "hicache_host_memory_mode", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens", "allow_auto_truncate", "enable_cache_report",
    "disaggregation_mode",
)
#: The loaded weights' checksum (``/weights_checker``), compared between workers of the same rank layout.
WEIGHTS = "weights_checksum"
FIELDS = (*IDENTITY, WEIGHTS, *PER_ROLE)
_WEIGHTS_FIX = ("; a weights_checksum that differs on one model path means other weights were loaded (another "
                "revision or a partial download under that path, or /update_weights_from_* applied to some workers "
                "only): restart those workers from the same checkpoint")
_CELL = 40  # characters of a value shown in the table


def _text(value: Any) -> str:
    """A /server_info value as the gateway lists facts: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class WorkerView:
    """One worker's fields as text, from its own /server_info or (unreachable) the gateway's listing."""

    worker: WorkerHandle
    values: dict[str, str]
    #: Empty when read from the worker itself; otherwise why only the gateway's facts were used.
    fallback: str = ""
    role: str = field(default="regular")
    #: The rank layout the weights checksum was computed over; or, with no checksum, why not.
    weights_layout: str = ""
    weights_missing: str = ""


#: Workers whose weights are hashed at once (each rank hashes on its own GPU).
_PARALLEL_READS = 16


def views(workers: Iterable[WorkerHandle]) -> list[WorkerView]:
    """Every worker's view: its own /server_info when reachable, else the gateway's facts about it."""
    out: list[WorkerView] = []
    for worker in workers:
        why = worker.unreachable or "not reachable from here"
        if worker.server is not None:
            try:
                info = worker.info()
            except SGLangError as exc:
                why = f"GET /server_info failed: {str(exc).splitlines()[0]}"
            else:
                out.append(WorkerView(worker, {f: _text(info.get(f)) for f in FIELDS if f != WEIGHTS},
                                      role=worker.role))
                continue
        facts = {f: worker.entry.facts[f] for f in FIELDS if f in worker.entry.facts}
        out.append(WorkerView(worker, facts, fallback=why, role=worker.role))
    return _with_weights(out)


def _with_weights(seen: list[WorkerView]) -> list[WorkerView]:
    """The views with each directly read worker's weights checksum, read from all of them at once.

    Each read is bounded (WEIGHTS_TIMEOUT_S), so hung routes on several workers cost that once, not once each.
    """
    direct = [v for v in seen if not v.fallback and v.worker.server is not None]
    with ThreadPoolExecutor(max(1, min(_PARALLEL_READS, len(direct)))) as pool:
        read = dict(zip((id(v) for v in direct), pool.map(lambda v: read_weights(v.worker.server), direct),
                        strict=True))
    out = []
    for view in seen:
        weights = read.get(id(view))
        if isinstance(weights, WeightsChecksum):
            view = dataclasses.replace(view, values={**view.values, WEIGHTS: weights.short()},
                                       weights_layout=weights.layout)
        elif weights is not None:
            view = dataclasses.replace(view, weights_missing=weights)
        out.append(view)
    return out


def _groups(field_name: str, seen: Sequence[WorkerView]) -> list[list[WorkerView]]:
    if field_name in IDENTITY:
        return [list(seen)]
    if field_name == WEIGHTS:  # a rank hashes its own shard: only equal layouts compare
        layouts = dict.fromkeys(v.weights_layout for v in seen)
        return [[v for v in seen if v.weights_layout == layout] for layout in layouts]
    roles = dict.fromkeys(v.role for v in seen)
    return [[v for v in seen if v.role == role] for role in roles]


def differing(seen: Sequence[WorkerView], fields: Sequence[str]) -> list[str]:
    """The fields whose known values differ (between all workers, or within a role for :data:`PER_ROLE`)."""
    out = []
    for name in fields:
        if any(len({v.values[name] for v in group if name in v.values}) > 1 for group in _groups(name, seen)):
            out.append(name)
    return out


def _cell(value: str | None) -> str:
    if value is None:
        return "?"
    return value if len(value) <= _CELL else value[: _CELL - 3] + "..."


def table(seen: Sequence[WorkerView], fields: Sequence[str]) -> list[str]:
    """``field | worker 0 (url) | worker 1 (url)`` rows for ``fields``, columns aligned ("?": not known)."""
    header = ["field", *(v.worker.name() + (f" [{v.role}]" if v.role != "regular" else "") for v in seen)]
    rows = [header] + [[name, *(_cell(v.values.get(name)) for v in seen)] for name in fields]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def compare_workers(seen: Sequence[WorkerView], ignore: Sequence[str], gate: str) -> GateOutcome:
    """The consistency outcome: one check (the differing fields, or none), the diff table and what was not read."""
    fields = [f for f in FIELDS if f not in ignore]
    diffs = differing(seen, fields) if len(seen) > 1 else []
    out = GateOutcome(gate)
    ignored = f", {len(FIELDS) - len(fields)} ignored ({', '.join(ignore)})" if ignore else ""
    listed = sum(bool(v.fallback) for v in seen)
    where = "each worker's own /server_info" + (f" (the gateway's listing for {listed} not read directly)"
                                                  if listed else "")
    out.add(compare(gate, "differing_fields", ", ".join(diffs) or "none", "==", "none",
                    source=f"{where}: {len(fields) - (WEIGHTS in fields)} launch fields compared{ignored}",
                    remedy="launch every worker with the same SGLang version, model and launch arguments (or "
                           "ignore=[...] a field that may differ on purpose)"
                           + (_WEIGHTS_FIX if WEIGHTS in diffs and "model_path" not in diffs else "")))
    if diffs:
        out.notes.append(f"{len(diffs)} field(s) differ between the workers (only those are shown):")
        out.notes += [f"  {row}" for row in table(seen, diffs)]
    if len(seen) < 2:
        out.notes.append(f"{len(seen)} worker(s) behind the gateway: nothing to compare")
    if WEIGHTS in fields:
        out.unchecked += [f"{v.worker.name()}: weights not compared ({v.weights_missing})" for v in seen
                          if v.weights_missing and not v.fallback]
        out.notes += _layout_notes(seen)
        out.context["weights"] = _weights_context(seen)
    for view in seen:
        if view.fallback:
            missing = [f for f in fields if f not in view.values]
            shown = ", ".join(sorted(set(fields) - set(missing))) or "nothing"
            out.notes.append(f"{view.worker.name()}: {view.fallback}; compared on the gateway's listing only "
                             f"({shown}); {len(missing)} field(s) not checked")
    return out


def _layout_notes(seen: Sequence[WorkerView]) -> list[str]:
    """Whose weights were compared with whose: only workers of one rank layout with each other."""
    notes: list[str] = []
    layouts = dict.fromkeys(v.weights_layout for v in seen if WEIGHTS in v.values)
    if len(layouts) > 1:
        notes.append("weights checksums compared only within one rank layout: " + "; ".join(
            f"{layout}: {sum(v.weights_layout == layout for v in seen)} worker(s)" for layout in layouts))
    return notes


def _weights_context(seen: Sequence[WorkerView]) -> str:
    read = [v for v in seen if WEIGHTS in v.values and not v.fallback]
    if not read:
        return "not compared: no worker answered GET /weights_checker with a checksum"
    sums = ", ".join(f"{v.worker.name()}: {v.values[WEIGHTS]} ({v.weights_layout})" for v in read)
    return f"each worker's GET /weights_checker per_engine_checksum (first 16 hex digits): {sums}"
