"""Issue 31: the run-wide load lock and a gate's own keywords each come from one helper, not a copy."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest_sglang
from pytest_sglang.gates import keywords
from pytest_sglang.gates.registry import GateContext

GATES = Path(pytest_sglang.__file__).parent / "gates"


def _gate(*, floor: float | None = None, path: str = "/health") -> dict[str, object]:
    made_here = "a local, not a keyword"  # noqa: F841 - locals() would hand it over
    floor = 2.0 if floor is None else floor  # read as it stands when asked
    return keywords.given()


def test_given_is_the_callers_keywords_as_they_stand() -> None:
    assert _gate() == {"floor": 2.0, "path": "/health"}
    assert _gate(floor=1.5, path="/ready") == {"floor": 1.5, "path": "/ready"}


class _Locking:
    def __init__(self) -> None:
        self.held = 0

    def __call__(self, spec: object, /) -> object:
        raise AssertionError("no load here")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        self.held += 1
        yield


def test_load_lock_is_the_plugins_lock_else_none() -> None:
    load = _Locking()
    with GateContext(server=None, load=load).load_lock():  # type: ignore[arg-type]
        assert load.held == 1
    with GateContext(server=None, load=lambda spec: spec).load_lock():  # type: ignore[arg-type]
        pass  # a plain load function: nothing to hold, no error


def test_no_gate_copies_the_idioms() -> None:
    """``locals()`` and the ``isinstance(ctx.load, LockingLoad)`` recipe live in the helpers only."""
    found = []
    for path in sorted(GATES.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "locals":
                found.append(f"{path.name}:{node.lineno} locals()")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                    and any(isinstance(a, ast.Name) and a.id == "LockingLoad" for a in node.args)
                    and path.name != "registry.py"):
                found.append(f"{path.name}:{node.lineno} isinstance(..., LockingLoad)")
    assert found == []
