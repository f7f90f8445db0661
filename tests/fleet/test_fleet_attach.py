"""--sglang-url at a REAL gateway (smg 1.13.0, sglang-router 0.3.2) in front of simulator workers.

Each test starts its simulators and its gateway itself, then runs pytest in a subprocess against it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import FAST_HEALTH, Gateway, copy_inner, load_fixture, run_inner, smg_command, wait_for

from tests.server.fakehttp import Route, fake_server, json_answer

STARTUP = ("--sglang-startup-timeout", "30")


def _fleet(sim_factory: Any, gateway_factory: Callable[..., Gateway], command: str, workers: int = 2,
           *extra: str) -> tuple[list[Any], Gateway]:
    sims = [sim_factory() for _ in range(workers)]
    gateway = gateway_factory(command, [s.url for s in sims], *extra)
    gateway.wait_ready(workers)
    return sims, gateway


def _kill(sim: Any) -> None:
    sim.proc.kill()
    sim.proc.wait(10)


def test_attach_detects_the_gateway_and_its_workers(gateway_command: str, sim_factory: Any,
                                                     gateway_factory: Callable[..., Gateway], tmp_path: Path) -> None:
    _, gateway = _fleet(sim_factory, gateway_factory, gateway_command)
    copy_inner(tmp_path, "fleet_shape")
    run = run_inner(tmp_path, "-s", "--sglang-url", gateway.url, *STARTUP, env={"FLEET_EXPECT_WORKERS": "2"})
    assert run.returncode == 0, run.output
    # smg says its own version (GET /get_loads); sglang-router 0.3.2 does not
    flavor = "sglang-router" if "sglang_router" in gateway_command else "smg 1.13.0"
    run.fnmatch_lines([f"sglang: mode=attach url={gateway.url}",
                       f"sglang: mode=attach gateway={flavor} workers=2 url={gateway.url}",
                       f"*FLEET gateway={flavor} workers=2 mode=attach launched=False unreachable=[[]None, None[]]*",
                       "*1 passed*"])


def test_the_gateway_line_never_splits_the_progress_line(sim_factory: Any, gateway_factory: Callable[..., Gateway],
                                                         tmp_path: Path) -> None:
    """The detection line used to be written from the first test's setup, inside its file's progress line."""
    _, gateway = _fleet(sim_factory, gateway_factory, smg_command())
    copy_inner(tmp_path, "fleet_shape")
    run = run_inner(tmp_path, "--sglang-url", gateway.url, *STARTUP, env={"FLEET_EXPECT_WORKERS": "2"})
    assert run.returncode == 0, run.output
    run.fnmatch_lines([f"sglang: mode=attach gateway=smg 1.13.0 workers=2 url={gateway.url}",
                       "test_fleet_shape.py .*[[]100%[]]"])
    assert run.output.count("test_fleet_shape.py") == 1, run.output  # one progress line, not two halves


def test_attach_names_a_dead_worker_the_gateway_still_calls_healthy(
        gateway_command: str, sim_factory: Any, gateway_factory: Callable[..., Gateway], tmp_path: Path) -> None:
    sims, gateway = _fleet(sim_factory, gateway_factory, gateway_command)  # default health check: every 60 s
    _kill(sims[1])
    assert all(w["is_healthy"] for w in gateway.workers())  # the gateway has not noticed
    copy_inner(tmp_path, "fleet_shape")
    run = run_inner(tmp_path, "--sglang-url", gateway.url, *STARTUP, env={"FLEET_EXPECT_WORKERS": "2"})
    assert run.returncode == 1, run.output
    index = sorted(s.url for s in sims).index(sims[1].url)
    run.fnmatch_lines([
        "*1 of 2 worker(s) behind the gateway failed the direct probe:",
        f"  worker {index} ({sims[1].url}): the gateway calls it healthy but GET /health -> connection refused*",
        "Fix: restart or remove the worker(s) named above*--sglang-fleet-direct off*",
    ])
    assert sims[0].url not in run.output.split("failed the direct probe:", 1)[1].split("Fix:", 1)[0]


def test_direct_off_judges_by_the_gateway_alone(sim_factory: Any, gateway_factory: Callable[..., Gateway],
                                                tmp_path: Path, router_gateway_command: str) -> None:
    # round_robin: a request the gateway sends to the dead worker is retried on the live one
    # (cache_aware would keep sending the inner test's prompt to the worker it hashed to)
    sims, gateway = _fleet(sim_factory, gateway_factory, router_gateway_command, 2, "--policy", "round_robin")
    _kill(sims[1])  # not probed, so not noticed: the gateway's word is taken
    copy_inner(tmp_path, "fleet_shape")
    run = run_inner(tmp_path, "-s", "--sglang-url", gateway.url, "--sglang-fleet-direct", "off", *STARTUP,
                    env={"FLEET_EXPECT_WORKERS": "2", "FLEET_EXPECT_REACHABLE": "0"})
    assert run.returncode == 0, run.output
    run.fnmatch_lines(["*FLEET * unreachable=[[]'direct probing off (--sglang-fleet-direct off)', "
                       "'direct probing off (--sglang-fleet-direct off)'[]]"])


def test_attach_waits_for_every_listed_worker_unless_min_workers(
        sim_factory: Any, gateway_factory: Callable[..., Gateway], tmp_path: Path) -> None:
    from fleet_helpers import smg_command

    sims, gateway = _fleet(sim_factory, gateway_factory, smg_command(), 2, *FAST_HEALTH.split())
    _kill(sims[1])
    wait_for(lambda: sum(w["is_healthy"] for w in gateway.workers()) == 1, 30, "the gateway to mark it unhealthy")
    copy_inner(tmp_path, "fleet_shape")
    env = {"FLEET_EXPECT_WORKERS": "2"}
    run = run_inner(tmp_path, "--sglang-url", gateway.url, "--sglang-startup-timeout", "3", env=env)
    assert run.returncode == 1, run.output
    run.fnmatch_lines([f"*gateway {gateway.url} (mode=attach) not ready after *: 1 of 2 workers healthy, 2 needed",
                       "Last readiness: GET /readiness -> 200 (1/2 workers healthy)",
                       "Workers as the gateway lists them:",
                       f"  regular {sims[1].url} UNHEALTHY" if sims[1].url > sims[0].url else
                       f"  regular {sims[0].url} healthy",
                       "*Fix: check the workers behind the gateway*or lower --sglang-min-workers*"])
    # --sglang-min-workers 1: ready; the unhealthy worker is listed but not probed
    alive = ",".join("1" if s is sims[0] else "0" for s in sorted(sims, key=lambda s: str(s.url)))
    run = run_inner(tmp_path, "-s", "--sglang-url", gateway.url, "--sglang-min-workers", "1", *STARTUP,
                    env={**env, "FLEET_EXPECT_REACHABLE": alive})
    assert run.returncode == 0, run.output
    assert "'unhealthy according to the gateway; not probed'" in run.output
    # more than the fleet has: never ready
    run = run_inner(tmp_path, "--sglang-url", gateway.url, "--sglang-min-workers", "3",
                    "--sglang-startup-timeout", "2", env=env)
    run.fnmatch_lines(["*1 of 2 workers healthy, 3 needed (--sglang-min-workers)"])


@contextmanager
def pod_ip_gateway() -> Iterator[str]:
    """smg's recorded /workers and /readiness, its workers renamed to addresses no resolver here knows.

    A gateway cannot register workers it cannot reach, so a real one cannot show this from one machine;
    its recorded answers can (the cluster shape: the gateway's Service reachable, the pods not).
    """
    record = load_fixture("smg-1.13.0-simulator")
    text = json.dumps(record["/workers"]["body"])
    for i in range(3):
        text = text.replace(f"http://WORKER{i}", f"http://worker-{i}.sglang.invalid:30000")
    routes: dict[str, Route] = {"/workers": lambda h: (200, text, "application/json"),
                                "/readiness": lambda h: json_answer(record["/readiness"]["body"])}
    with fake_server(routes, not_found=(404, '{"error":"unknown_url"}', "application/json")) as fake:
        yield fake.url


def test_workers_not_reachable_from_here(tmp_path: Path) -> None:
    copy_inner(tmp_path, "fleet_unreachable")
    with pod_ip_gateway() as url:
        run = run_inner(tmp_path, "-s", "--sglang-url", url, *STARTUP)
        assert run.returncode == 0, run.output
        run.fnmatch_lines([f"sglang: mode=attach gateway=smg workers=3 url={url}", "*1 passed*"])
        run = run_inner(tmp_path, "--sglang-url", url, "--sglang-fleet-direct", "require", *STARTUP)
    assert run.returncode == 1, run.output
    run.fnmatch_lines(["*3 of 3 worker(s) behind the gateway failed the direct probe:",
                       "  worker 0 (http://worker-0.sglang.invalid:30000): not reachable from here: * "
                       "(--sglang-fleet-direct require)"])


def test_attach_header_line_shows_without_dash_s(tmp_path: Path) -> None:
    copy_inner(tmp_path, "fleet_unreachable")
    with pod_ip_gateway() as url:
        run = run_inner(tmp_path, "--sglang-url", url, *STARTUP)
    assert run.returncode == 0, run.output
    run.fnmatch_lines([f"sglang: mode=attach gateway=smg workers=3 url={url}"])


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--sglang-min-workers", "0", "must be a whole number >= 1"),
    ("--sglang-min-workers", "two", "expected a whole number, e.g. 4"),
    ("--sglang-fleet-direct", "sometimes", "sometimes"),
])
def test_bad_fleet_option_values(tmp_path: Path, option: str, value: str, message: str) -> None:
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    run = run_inner(tmp_path, "--sglang-url", "http://127.0.0.1:9", option, value)
    assert run.returncode == 4, run.output  # a usage error: nothing runs
    assert option in run.output and message in run.output
