"""Each way a gateway can list a worker as other than what it serves, named (gates/fleet/registration.py)."""

from __future__ import annotations

from pytest_sglang.fleet.discovery import WorkerEntry
from pytest_sglang.fleet.handle import WorkerHandle
from pytest_sglang.gates.correctness.consistency import WorkerView
from pytest_sglang.gates.fleet.registration import problems, registration_check

OWN = {"served_model_name": "llama", "model_path": "/m/llama", "tp_size": "1", "version": "0.5.23",
       "disaggregation_mode": "null"}


def _view(model_id: str | None, *, role: str = "regular", facts: dict[str, str] | None = None,
          values: dict[str, str] | None = None, fallback: str = "") -> WorkerView:
    entry = WorkerEntry("http://10.0.0.1:30000", role, True, model_id=model_id, facts=facts or {})  # type: ignore[arg-type]
    return WorkerView(WorkerHandle(1, entry), dict(OWN if values is None else values), fallback=fallback)


def test_a_worker_registered_as_what_it_serves_passes() -> None:
    check = registration_check([_view("llama", facts={"tp_size": "1", "version": "0.5.23"})], "fleet")
    assert (check.measured, check.passed) == ("none", True)
    assert check.source.endswith(": 1 worker(s)")


def test_unknown_is_named_even_when_the_worker_cannot_be_read() -> None:
    found = problems(_view("unknown", values={}, fallback="not reachable from here: no route to host"))
    assert found == ["worker 1 (http://10.0.0.1:30000) is registered as model 'unknown' (the gateway could not read "
                     "its model when it registered it: it routes it no request for that model)"]


def test_model_type_and_labels_that_differ_are_named() -> None:
    view = _view("mistral", role="decode", facts={"tp_size": "2", "model_path": "/m/llama"})
    assert problems(view) == [
        "decode worker 1 (http://10.0.0.1:30000): model_id 'mistral' at the gateway, the worker serves 'llama'",
        "decode worker 1 (http://10.0.0.1:30000): worker_type 'decode' at the gateway, the worker runs "
        "disaggregation_mode null",
        "decode worker 1 (http://10.0.0.1:30000): tp_size '2' at the gateway, '1' on the worker",
    ]
    check = registration_check([view], "fleet")
    assert not check.passed and "sglang PR #37555" in check.remedy


def test_a_gateway_that_lists_no_model_or_labels_is_not_a_mismatch() -> None:
    assert problems(_view(None)) == []
    assert problems(_view("/m/llama", values={**OWN, "served_model_name": "null"})) == []
