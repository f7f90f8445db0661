"""Real workloads against the simulator (a real subprocess): trace replay, multi-turn chat, cache figures.

The simulator's radix cache (``simulator/scheduling/radix.py``) serves shared prefixes from cache and reports
``meta_info.cached_tokens`` (and ``usage.prompt_tokens_details.cached_tokens`` with
``--enable-cache-report``) and ``sglang:cached_tokens_total`` as SGLang 0.5.23 does, so the hit
rates below are measured, not assumed. Time is compressed (``--sim-time-scale 0.05``, trace x 0.05).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.workloads import traces as trace_io

TRACES = Path(__file__).parents[2] / "fixtures" / "traces"
MOONCAKE = f"mooncake:{TRACES / 'mooncake-sample.jsonl'}"
BURSTGPT = f"burstgpt:{TRACES / 'burstgpt-sample.csv'}"
SIM = ("--enable-metrics", "--enable-cache-report")


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from pytest_sglang.simulator import Simulator

    sim = Simulator(["--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05", *SIM],
                    wait="none", log_path=tmp_path_factory.mktemp("sim") / "sim.log")
    sim.wait = "healthy"
    sim.start()
    yield sim.url
    sim.stop()


@pytest.mark.parametrize("api", ["native", "chat"])
def test_a_mooncake_replay_hits_the_prefix_cache_as_the_server_counts_it(sim_url: str, api: str) -> None:
    result = run_load(sim_url, LoadSpec(dataset=MOONCAKE, requests=40, trace_time_scale=0.05, api=api,
                                        flush_cache=True))
    assert result.completed == 40 and result.errors == {}
    cache = result.cache_report
    # Shared hash ids are shared prompt blocks: the server serves a large part of the prompts from cache.
    assert cache["requests_reporting"] == 40 and cache["cache_hit_rate_pct"] > 20
    if api == "native":  # token ids: the server's counters agree with the answers to the token
        assert cache["server_cache_hit_rate_pct"] == pytest.approx(cache["cache_hit_rate_pct"], abs=0.5)
        assert result.total_input_tokens == sum(r.input_len for r in trace_io.rows("mooncake", MOONCAKE[9:], 40))
    facts = result.workload
    assert facts["trace"] == "mooncake" and facts["rows"] == 40 and facts["cap_waits"] == 0
    err = facts["timing_error_ms"]
    assert 0 <= err["p50"] <= err["p99"] <= err["max"] < 1000  # measured; loose bound for a shared 2-core box
    # Sent open loop on the trace's clock: request i is not sent before its (scaled) trace time.
    assert all(r.start >= r.scheduled - 0.002 for r in result.records if r.scheduled is not None)
    assert result.duration >= facts["span_s"]


def test_the_replay_is_open_loop_requests_go_out_on_time_while_earlier_ones_still_run(sim_url: str,
                                                                                      tmp_path: Path) -> None:
    path = tmp_path / "slow.jsonl"
    # 8 requests 200 ms apart (x 0.1 = 20 ms), each decoding 300 tokens (~0.5 s or more on this simulator).
    path.write_text("".join(json.dumps({"timestamp": 200 * i, "input_length": 64, "output_length": 300,
                                        "hash_ids": [i]}) + "\n" for i in range(8)))
    result = run_load(sim_url, LoadSpec(dataset=f"mooncake:{path}", requests=8, trace_time_scale=0.1))
    assert result.completed == 8
    starts = sorted(r.start - r.scheduled for r in result.records if r.scheduled is not None)
    assert len(starts) == 8 and max(starts) < 0.1  # none waited for an earlier answer
    assert result.max_concurrent_requests >= 4  # sent while earlier requests were still streaming
    assert result.workload["cap_waits"] == 0


def test_a_burstgpt_replay_with_a_small_cap_reports_the_requests_it_held_back(sim_url: str) -> None:
    result = run_load(sim_url, LoadSpec(dataset=BURSTGPT, requests=40, trace_time_scale=0.05, concurrency=2))
    facts = result.workload
    assert result.completed == 38 and facts["skipped_rows"] == 2  # the two rows that failed when recorded
    assert facts["cap_waits"] > 0 and facts["in_flight_cap"] == 2
    assert result.max_concurrent_requests <= 2
    assert "in-flight cap 2 reached" in result.workload_context()["replay"]
    assert result.cache_report["cache_hit_rate_pct"] < 5  # BurstGPT has no prefix information


def test_multiturn_sessions_grow_their_context_with_the_servers_answers(sim_url: str) -> None:
    spec = LoadSpec(dataset="multiturn:sessions=3,turns=4,think_s=0.02,first_len=64,turn_len=16", api="chat",
                    concurrency=3, requests=100, output_len=12)
    result = run_load(sim_url, spec)
    assert result.completed == 12 and result.errors == {} and result.not_sent == 0
    by_session: dict[int, list[Any]] = {}
    for r in sorted(result.records, key=lambda r: r.index):
        by_session.setdefault(r.index // 4, []).append(r)
    for turns in by_session.values():
        lens = [r.prompt_len for r in turns]
        # Each turn resends the history: previous prompt + the 12-token answer + a 16-word question.
        assert all(b > a + 12 for a, b in itertools.pairwise(lens)), lens
        assert all(b.start >= a.start + a.e2e + 0.02 for a, b in itertools.pairwise(turns))  # sequential, think
        assert all(r.cached_tokens is not None and r.cached_tokens > 0 for r in turns[1:])
    assert result.cache_report["cache_hit_rate_pct"] > 30
    assert result.workload == {"sessions": 3, "turns": 4, "think_s": 0.02}
    assert result.max_concurrent_requests <= 3  # one turn in flight per session, sessions up to concurrency


def test_the_requests_cap_cuts_the_last_session_short(sim_url: str) -> None:
    spec = LoadSpec(dataset="multiturn:sessions=3,turns=4,first_len=16,turn_len=4", api="chat", requests=6,
                    output_len=4, concurrency=3)
    result = run_load(sim_url, spec)
    assert result.completed == 6 and sorted(r.index for r in result.records) == [0, 1, 2, 3, 4, 5]


def test_the_result_line_keeps_the_new_figures(sim_url: str) -> None:
    result = run_load(sim_url, LoadSpec(dataset=MOONCAKE, requests=6, trace_time_scale=0.01))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["dataset_name"] == MOONCAKE and data["cache_report"]["requests_reporting"] == 6
    assert set(data["workload"]["timing_error_ms"]) == {"p50", "p99", "max"}
