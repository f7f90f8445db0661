"""The simulator answers the requests recorded from real SGLang 0.5.23 with the same layout.

``fixtures/captures-0.5.23/correctness/`` holds raw responses of the real server (CPU, tiny dummy
Llama, ``--enable-metrics``): logprobs in the three layouts, ``n``, grammars and the 4xx errors. The
same request to the simulator must give the same status, the same keys at every level (a JSON null
matches any value: the text differs, a random-weight model finishes differently) and, for errors, the
same message (minus the real server's file path and xgrammar's clock).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_sglang.simulator import Simulator
from tests.conftest import FAST

CAPTURES = Path(__file__).parents[2] / "fixtures" / "captures-0.5.23" / "correctness"
CASES = sorted(p.stem for p in CAPTURES.glob("*.txt"))


def _load(name: str) -> tuple[int, str, str, str]:
    """(status, path, request body, response body) of a capture: ``HTTP 200`` / ``request: POST /p {...}``."""
    head, body = (CAPTURES / f"{name}.txt").read_text().split("\n\n", 1)
    status, request = head.splitlines()
    _, _, path, payload = request.split(" ", 3)
    return int(status.split()[1]), path, payload, body


def _shape(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        if key == "top_logprobs":  # completions: {token text: logprob}, keyed by data
            return {"<token>": "float"} if value else {}
        return {k: _shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0], key)] if value else []
    return None if value is None else type(value).__name__.replace("int", "float")


def _same(a: Any, b: Any, where: str = "$") -> None:
    if a is None or b is None:
        return  # null on either side: a value the content decides (finish_reason, matched_stop...)
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if a and b:
            _same(a[0], b[0], f"{where}[0]")
    else:
        assert a == b, f"{where}: {a} != {b}"


def _payloads(body: str) -> list[Any]:
    if not body.startswith("data: "):
        return [json.loads(body)]
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def _error(payload: dict[str, Any]) -> dict[str, Any]:
    """An error envelope without the real server's file path and xgrammar's clock."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, str):
            value = re.sub(r'  File "[^"]*", line \d+, in \w+\n  ', "", value)
            return re.sub(r"\[\d\d:\d\d:\d\d\] ", "", value)
        return value

    cleaned: dict[str, Any] = clean(payload)
    return cleaned


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One simulator for every case (launched like ``sim_factory``: a real subprocess)."""
    log = tmp_path_factory.mktemp("sim-logs") / "recorded-shapes.log"
    with Simulator([*FAST, "--enable-metrics"], log_path=log) as sim:
        yield sim.url


@pytest.mark.parametrize("name", CASES)
def test_same_layout_as_real_0_5_23(sim_url: str, name: str) -> None:
    status, path, payload, recorded = _load(name)
    r = httpx.post(f"{sim_url}{path}", content=payload.encode(), headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    real, ours = _payloads(recorded), _payloads(r.text)
    if "message" in real[0] or "error" in real[0]:
        assert [_error(p) for p in ours] == [_error(p) for p in real]
        return
    real_shapes, our_shapes = [_shape(p) for p in real], [_shape(p) for p in ours]
    for shape in real_shapes:  # every kind of chunk the real server sent, the simulator sends too
        errors = []
        for candidate in our_shapes:
            try:
                _same(shape, candidate)
                break
            except AssertionError as exc:
                errors.append(str(exc))
        else:
            pytest.fail(f"{name}: no simulator payload has the layout {shape}: {errors}")
