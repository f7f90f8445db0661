"""The gateway's registration of each worker against what the worker serves (``sglang_fleet(consistent=True)``).

Real sglang-router 0.3.2 in front of simulator workers. One worker answers 503 on ``/server_info``,
``/model_info`` and ``/v1/models`` for its first seconds (``--sim-fault model-info-after``) while ``/health`` is
200: the router registers it then, as the model ``unknown``, and keeps it so once the worker answers
(sglang PR #37555). The gate names that worker; the healthy twin (the same fleet without the fault) passes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpcore  # noqa: F401  before pytester's sys.modules snapshot: a re-import would unmap httpx's errors
import httpx
import pytest

from gates.fleetkit import ROUTER, ROUTER_PYTHON, OwnFleet, own_fleet

INNER = """
import pytest


@pytest.mark.sglang_fleet(ignore=["weights_checksum"])
def test_registered_as_served():
    pass
"""
#: 200 simulated seconds at the fleet's time scale of 0.05: 10 s of 503s, long past the router's registration.
FAULT = ("--sim-fault", "model-info-after:200")


def _needs_router() -> None:
    if not Path(ROUTER_PYTHON).is_file() or not os.access(ROUTER_PYTHON, os.X_OK):
        pytest.skip(f"needs sglang-router 0.3.2: set SGLANG_ROUTER_PYTHON (now {ROUTER_PYTHON}) to the Python of "
                    "a venv where `pip install sglang-router==0.3.2` ran")


def _status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.HTTPError:
        return None


@pytest.fixture(params=[False, True], ids=["healthy", "model-info-after"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[OwnFleet, bool]]:
    _needs_router()
    faulty: bool = request.param
    workers = (("--model-path", "sim/tiny-llama"), ("--model-path", "sim/tiny-llama", *(FAULT if faulty else ())))
    with own_fleet(workers, tmp_path, gateway=ROUTER) as own:
        deadline = time.monotonic() + 60
        # The worker answers again before the gate reads it: only the gateway's registration is wrong.
        while _status(f"{own.workers[1].url}/server_info") != 200:
            assert time.monotonic() < deadline, "the faulty worker never answered /server_info"
            time.sleep(0.5)
        yield own, faulty


def test_a_worker_registered_as_unknown_is_named(pytester: pytest.Pytester, fleet: tuple[OwnFleet, bool]) -> None:
    own, faulty = fleet
    listed = httpx.get(f"{own.url}/workers", timeout=5).json()["workers"]
    models = {w["url"].rstrip("/"): w["model_id"] for w in listed}
    assert models[own.workers[1].url] == ("unknown" if faulty else "sim/tiny-llama")  # what the router did
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("--sglang-url", own.url, "-p", "no:cacheprovider", "-rfE")
    if not faulty:
        result.assert_outcomes(passed=1)
        return
    result.assert_outcomes(failed=1)
    port = own.workers[1].url.rsplit(":", 1)[1]
    result.stdout.fnmatch_lines([
        f"*registration_mismatches: measured worker ? (http://127.0.0.1:{port}) is registered as model 'unknown' "
        "(the gateway could not read its model when it registered it: it routes it no request for that model), "
        "required == none [[]gateway GET /workers (model_id, worker_type, labels/metadata) against each worker's own "
        "/server_info: 2 worker(s)[]]: FAILED",
        "*re-register the named workers with the gateway*sglang PR #37555*",
    ])
