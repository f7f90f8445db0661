"""One readiness loop for a server and a gateway (server/poll.py, issue 31): one deadline, one attach grace."""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from tenacity import RetryError, wait_fixed

import pytest_sglang
from pytest_sglang.server import poll as poll_module
from pytest_sglang.server.poll import ATTACH_GRACE_S, attach_gave_up, poll
from pytest_sglang.server.probe import NotReadyYet

_PACKAGE = Path(pytest_sglang.__file__).parent


@dataclass
class _State:
    deadline: float
    trouble_since: float | None = None
    final: bool = False


def _not_yet(state: _State, *, trouble: bool = False) -> None:
    if trouble and state.trouble_since is None:
        state.trouble_since = time.monotonic()
    raise NotReadyYet("not yet")


def test_the_loop_and_the_attach_grace_are_written_once() -> None:
    # Before: server/readiness.py and fleet/readiness.py each built their own Retrying and ATTACH_GRACE_S.
    grace, loops = [], []
    for path in sorted(_PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                grace += [path.relative_to(_PACKAGE).as_posix() for t in targets
                          if isinstance(t, ast.Name) and t.id == "ATTACH_GRACE_S"]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Retrying":
                loops.append(path.relative_to(_PACKAGE).as_posix())
    assert grace == ["server/poll.py"]
    assert "server/readiness.py" not in loops and "fleet/readiness.py" not in loops
    for reader in ("server/readiness.py", "fleet/readiness.py"):
        assert "from pytest_sglang.server.poll import poll" in (_PACKAGE / reader).read_text(encoding="utf-8")


def test_a_probe_that_answers_ends_the_wait() -> None:
    answers = iter([None, None, "ready"])

    def probe() -> str:
        answer = next(answers)
        if answer is None:
            raise NotReadyYet("starting")
        return answer

    state = _State(deadline=time.monotonic() + 30)
    assert poll(probe, state, exited=lambda: False, attach=False, wait=wait_fixed(0)) == "ready"


def test_the_wait_ends_at_its_deadline() -> None:
    state = _State(deadline=time.monotonic() + 0.2)
    with pytest.raises(RetryError):
        poll(lambda: _not_yet(state), state, exited=lambda: False, attach=False, wait=wait_fixed(0.01))
    assert time.monotonic() >= state.deadline


def test_the_wait_ends_when_the_process_exits() -> None:
    state = _State(deadline=time.monotonic() + 60)
    probes = []

    def probe() -> None:
        probes.append(1)
        _not_yet(state)

    with pytest.raises(RetryError):
        poll(probe, state, exited=lambda: len(probes) >= 3, attach=False, wait=wait_fixed(0))
    assert len(probes) == 3


def test_attach_gives_up_after_the_grace_and_at_once_on_a_final_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(poll_module, "ATTACH_GRACE_S", 0.0)
    state = _State(deadline=time.monotonic() + 60)
    with pytest.raises(RetryError):
        poll(lambda: _not_yet(state, trouble=True), state, exited=lambda: False, attach=True, wait=wait_fixed(0))
    assert time.monotonic() < state.deadline
    assert attach_gave_up(_State(deadline=0.0, final=True))
    assert not attach_gave_up(_State(deadline=0.0, trouble_since=time.monotonic() + ATTACH_GRACE_S))


def test_any_other_error_ends_the_wait_at_once() -> None:
    state = _State(deadline=time.monotonic() + 60)

    def probe() -> None:
        raise PermissionError("401")

    with pytest.raises(PermissionError):
        poll(probe, state, exited=lambda: False, attach=True, wait=wait_fixed(0))
