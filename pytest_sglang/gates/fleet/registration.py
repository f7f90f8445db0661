"""How the gateway registered each worker, against what the worker serves (``sglang_fleet(consistent=True)``).

The gateway's ``GET /workers`` gives each worker a ``model_id``, a ``worker_type`` and launch facts (smg 1.x
``labels``, sglang-router 0.3.x ``metadata``), read from the worker when it was registered. A worker
registered before it could answer ``/server_info`` and ``/model_info`` is listed under the model ``unknown``:
sglang-router 0.3.2 does so (measured with the simulator's ``model-info-after`` fault), and sglang PR #37555
saw such workers healthy and without traffic for the life of the gateway (about 40 % of a fleet unused with
every pod Ready). Each worker the gateway lists wrongly is named, with the gateway's value and the worker's.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_sglang.gates.base import Check, compare
from pytest_sglang.gates.correctness.consistency import WorkerView

#: The placeholder model a gateway registers when it could not read the worker's model.
UNKNOWN_MODEL = "unknown"
#: Launch facts the gateway lists and the worker's /server_info states alike (text on both sides).
FACTS = ("model_path", "served_model_name", "tp_size", "dp_size", "pp_size", "version", "weight_version")
_ROLE_OF_MODE = {"prefill": "prefill", "decode": "decode"}
SOURCE = "gateway GET /workers (model_id, worker_type, labels/metadata) against each worker's own /server_info"
_FIX = ("re-register the named workers with the gateway (DELETE /workers/<id>, then POST /workers {\"url\": ...}) or "
        "restart the gateway once every worker answers /model_info; register workers only when they are ready "
        "(sglang PR #37555)")


def _served(view: WorkerView) -> str | None:
    name = view.values.get("served_model_name")
    return name if name and name != "null" else view.values.get("model_path")


def problems(view: WorkerView) -> list[str]:
    """What the gateway lists wrongly about one worker (empty: it matches what the worker serves)."""
    entry, name = view.worker.entry, view.worker.name()
    out: list[str] = []
    if entry.model_id == UNKNOWN_MODEL:
        out.append(f"{name} is registered as model 'unknown' (the gateway could not read its model when it "
                   f"registered it: it routes it no request for that model)")
    if view.fallback:  # only the gateway's own listing is known: nothing of the worker's to compare with
        return out
    served = _served(view)
    if entry.model_id not in (None, UNKNOWN_MODEL) and served is not None and entry.model_id != served:
        out.append(f"{name}: model_id {entry.model_id!r} at the gateway, the worker serves {served!r}")
    mode = view.values.get("disaggregation_mode")
    role = _ROLE_OF_MODE.get(mode or "", "regular")
    if mode is not None and entry.role != role:
        out.append(f"{name}: worker_type {entry.role!r} at the gateway, the worker runs disaggregation_mode {mode}")
    for fact in FACTS:
        listed, own = entry.fact(fact), view.values.get(fact)
        if listed is not None and own is not None and own != "null" and listed != own:
            out.append(f"{name}: {fact} {listed!r} at the gateway, {own!r} on the worker")
    return out


def registration_check(seen: Sequence[WorkerView], gate: str) -> Check:
    """One check: every worker registered as what it serves ("none" wrong), naming each that is not."""
    found = [p for view in seen for p in problems(view)]
    return compare(gate, "registration_mismatches", "; ".join(found) or "none", "==", "none",
                   source=f"{SOURCE}: {len(seen)} worker(s)", remedy=_FIX)
