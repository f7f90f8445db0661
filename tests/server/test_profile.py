"""One window under SGLang's profiler (``server/profile.py``) against the simulator's 0.5.23 routes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx

from pytest_sglang.server.profile import ProfileWindow, profile_window
from tests.conftest import SimFactory


def test_a_window_writes_one_trace_and_says_where(sim_factory: SimFactory, tmp_path: Path) -> None:
    sim = sim_factory()
    window = profile_window(sim.url, None, tmp_path / "t", deadline_s=60, cpu=True, profile_id="w1")
    assert window.taken and not window.problem, window.line()
    assert [f.name for f in window.files] == ["w1-TP-0.trace.json.gz"]
    trace = json.loads(gzip.decompress(window.files[0].read_bytes()))
    assert trace["traceEvents"][0]["args"]["activities"] == ["CPU"]
    assert window.line().startswith(f"trace in {tmp_path / 't'} (1 file, ")
    # the profiler is stopped: a second window starts again
    assert profile_window(sim.url, None, tmp_path / "t2", deadline_s=60, cpu=False, profile_id="w2").taken


def test_a_profile_already_running_is_quoted_not_taken(sim_factory: SimFactory, tmp_path: Path) -> None:
    sim = sim_factory()
    assert httpx.post(f"{sim.url}/start_profile", json={"output_dir": str(tmp_path / "other")}).text == \
        "Start profiling.\n"
    window = profile_window(sim.url, None, tmp_path / "t", deadline_s=60, cpu=True, profile_id="w")
    assert window.line() == "NOT TAKEN: POST /start_profile answered 500 'Internal Server Error'"
    assert httpx.post(f"{sim.url}/stop_profile").status_code == 200
    assert httpx.post(f"{sim.url}/stop_profile").status_code == 500  # 0.5.23: "Profiling is not in progress"


def test_a_bad_profile_body_is_refused_as_fastapi_does(sim_factory: SimFactory) -> None:
    sim = sim_factory()
    resp = httpx.post(f"{sim.url}/start_profile", json={"activities": ["TPU"]})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "activities"]


def test_the_line_of_a_trace_written_elsewhere_names_the_directory() -> None:
    window = ProfileWindow(Path("/srv/traces/t-1"), True, seconds=1.5)
    assert window.line() == ("trace written by the server to /srv/traces/t-1 (no trace file found there from this "
                             "host)")
    assert ProfileWindow(Path("x"), False, problem="why").line() == "NOT TAKEN: why"
