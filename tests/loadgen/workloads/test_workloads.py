"""Real workloads, without a server: dataset specs, streaming trace readers, hash-id prefixes, cache figures."""

from __future__ import annotations

import itertools
import json
import tracemalloc
from pathlib import Path

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen import LoadSpec
from pytest_sglang.loadgen.client.servermetrics import parse_cache
from pytest_sglang.loadgen.client.streams import make_reader
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts.datasets import PromptSource, check_trace
from pytest_sglang.loadgen.run.replay import trace_prompt
from pytest_sglang.loadgen.run.result import LoadResult, cache_report, merge_cache_reports
from pytest_sglang.loadgen.workloads import traces
from pytest_sglang.loadgen.workloads.forms import MOONCAKE_BLOCK, MultiTurnShape, multiturn_shape

TRACES = Path(__file__).parents[2] / "fixtures" / "traces"
MOONCAKE = TRACES / "mooncake-sample.jsonl"
BURSTGPT = TRACES / "burstgpt-sample.csv"


def _mooncake(tmp_path: Path, rows: list[object], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


# ---- dataset specs: checked when the spec is built, each error names the field, the value and the fix --------
def test_multiturn_options_parse_with_defaults() -> None:
    assert multiturn_shape("multiturn") == MultiTurnShape()
    shape = multiturn_shape("multiturn:sessions=3,turns=5,think_s=0.25,system_len=100,first_len=64,turn_len=8")
    assert shape == MultiTurnShape(sessions=3, turns=5, think_s=0.25, system_len=100, first_len=64, turn_len=8)
    assert MultiTurnShape(turns=4).session_count(10) == 3 and shape.session_count(10) == 3


@pytest.mark.parametrize(("dataset", "message"), [
    ("multiturn:turn=3", "LoadSpec.dataset='multiturn:turn=3': has no option 'turn' (did you mean 'turns'?). "
                         "Fix: use the options sessions, turns, think_s, system_len, first_len, turn_len, e.g. "),
    ("multiturn:turns", "option 'turns' has no value. Fix: write turns=VALUE"),
    ("multiturn:turns=0", "turns='0' is not a whole number from 1 to 1,048,576"),
    ("multiturn:think_s=-1", "think_s='-1' is not a number of seconds from 0 to 3600"),
    ("multiturn:system_len=x", "system_len='x' is not a whole number from 0 to 1,048,576"),
])
def test_bad_multiturn_options_name_the_option(dataset: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(dataset=dataset, api="chat")
    assert message in str(info.value)


@pytest.mark.parametrize("dataset", ["multiturn:turns=2,turns=3", "multiturn:turns=2, think_s=1,turns=2"])
def test_a_multiturn_option_given_twice_is_refused_naming_it(dataset: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(dataset=dataset, api="chat")
    assert f"LoadSpec.dataset={dataset!r}: gives option 'turns' twice (turns=2, turns=" in str(info.value)
    assert "Fix: give each option once" in str(info.value)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"dataset": "multiturn"}, "LoadSpec.api='native': a multiturn dataset is a conversation through the chat API "
                               "(as SGLang's bench_serving multi-turn mode). Fix: use api='chat' (--api chat)"),
    ({"dataset": "multiturn", "api": "chat", "request_rate": 2.0}, "LoadSpec.request_rate=2.0: cannot pace a "
                                                                   "multiturn dataset"),
    ({"dataset": f"mooncake:{MOONCAKE}", "request_rate": 2.0}, "cannot be combined with the mooncake trace, which "
                                                               "gives the arrival times. Fix: drop request_rate; "
                                                               "speed the replay up or down with trace_time_scale"),
    ({"dataset": f"burstgpt:{BURSTGPT}", "processes": 2, "concurrency": 4}, "LoadSpec.processes=2: must be 1 for "
                                                                            "dataset burstgpt"),
    ({"dataset": "mooncake:"}, "LoadSpec.dataset='mooncake:': unknown dataset. Fix: use random-ids, sharegpt:PATH, "
                               "jsonl:PATH, mooncake:PATH, burstgpt:PATH, multiturn[:KEY=VALUE,...], "
                               "image[:KEY=VALUE,...] or mmmu:PATH"),
    ({"dataset": "random-ids:x"}, "unknown dataset"),
    ({"trace_time_scale": 0}, "LoadSpec.trace_time_scale=0: must be a number from 1e-06 to 1e+06. Fix: use 1.0 to "
                              "replay at the recorded pace, 0.1 for 10x faster, 2.0 for twice as slow"),
    ({"trace_time_scale": float("nan")}, "LoadSpec.trace_time_scale=nan"),
    ({"trace_time_scale": True}, "LoadSpec.trace_time_scale=True"),
    ({"trace_time_scale": 0.5}, "LoadSpec.trace_time_scale=0.5: applies to a trace replay only, not to dataset "
                                "random-ids. Fix: drop trace_time_scale, or give dataset='mooncake:PATH'"),
    ({"dataset": "multiturn:sessions=70000", "api": "chat"}, "has 70,000 sessions, all at once (no concurrency): at "
                                                             "most 65,536. Fix: give concurrency=N"),
])
def test_bad_workload_specs(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(**kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_a_trace_is_not_sent_all_at_once_so_many_requests_are_fine() -> None:
    spec = LoadSpec(dataset=f"mooncake:{MOONCAKE}", requests=100_000)  # no concurrency, no rate: the trace paces
    assert spec.in_flight() == 1024 and "trace times x 1" in spec.shape()
    assert spec.load_timeout(span_s=500.0) > spec.load_timeout(span_s=0.0) + 499


# ---- Mooncake and BurstGPT readers -------------------------------------------------------------------------
def test_the_mooncake_sample_reads_with_its_times_and_shared_blocks() -> None:
    found = traces.scan("mooncake", MOONCAKE, 1000)
    assert found.rows == 40 and found.skipped == 0 and found.shared_blocks > 0
    rows = list(traces.rows("mooncake", MOONCAKE, 1000))
    assert rows[0].offset_s == 0.0 and rows[-1].offset_s == pytest.approx(found.span_s)
    assert all(a.offset_s <= b.offset_s for a, b in itertools.pairwise(rows))
    assert all(len(r.hash_ids) == -(-r.input_len // MOONCAKE_BLOCK) for r in rows)
    assert traces.scan("mooncake", MOONCAKE, 5).rows == 5  # requests caps the rows read


def test_the_burstgpt_sample_skips_requests_that_failed_when_recorded() -> None:
    found = traces.scan("burstgpt", BURSTGPT, 1000)
    assert (found.rows, found.skipped, found.shared_blocks) == (38, 2, 0)
    first = next(iter(traces.rows("burstgpt", BURSTGPT, 1)))
    assert first.offset_s == 0.0 and first.hash_ids == () and first.input_len == 898 and first.output_len == 148


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "line 2 is not JSON"),
    ("[1, 2]", "line 2 is not a JSON object"),
    ('{"timestamp": "soon", "input_length": 5, "output_length": 5}', "line 2 has timestamp='soon'"),
    ('{"timestamp": 10, "input_length": 0, "output_length": 5}', "line 2 has input_length=0, output_length=5. Fix: "
                                                                 "give input_length from 1 and output_length from 0 "
                                                                 "to 1,048,576"),
    ('{"timestamp": 10, "input_length": 5, "output_length": 5, "hash_ids": ["a"]}', "line 2 has hash_ids that are "
                                                                                   "not a list of integers"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 5}', "line 2 goes back in time (0 s after 0.1 s). Fix: "
                                                                "sort the trace by timestamp"),
])
def test_a_bad_mooncake_row_names_its_line_before_anything_is_sent(tmp_path: Path, line: str, message: str) -> None:
    path = _mooncake(tmp_path, [{"timestamp": 100, "input_length": 5, "output_length": 5}, line])
    with pytest.raises(ConfigError) as info:
        PromptSource(LoadSpec(dataset=f"mooncake:{path}", requests=10))
    assert str(info.value).startswith(f"dataset='mooncake:{path}': {message}")


def test_mooncake_rows_that_generated_nothing_are_skipped_and_counted(tmp_path: Path) -> None:
    path = _mooncake(tmp_path, [{"timestamp": 0, "input_length": 5, "output_length": 0},
                                {"timestamp": 5, "input_length": 5, "output_length": 3}])
    found = traces.scan("mooncake", path, 10)
    assert (found.rows, found.skipped, found.span_s) == (1, 1, 0.005)


def test_bad_burstgpt_files(tmp_path: Path) -> None:
    header = tmp_path / "h.csv"
    header.write_text("time,tokens\n1,2\n")
    with pytest.raises(ConfigError, match="has no Timestamp, Request tokens, Response tokens columns in its header "
                                          r"\(found time, tokens\)"):
        traces.scan("burstgpt", header, 10)
    partial = tmp_path / "p.csv"
    partial.write_text("Timestamp,Model,Request tokens\n1,m,2\n")
    with pytest.raises(ConfigError) as info:
        traces.scan("burstgpt", partial, 10)
    # Only what is missing is called missing; what was found is listed as found.
    assert "has no Response tokens column in its header (found Timestamp, Model, Request tokens)" in str(info.value)
    cell = tmp_path / "c.csv"
    cell.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,m,x,2,3,API log\n")
    with pytest.raises(ConfigError, match="line 2 has no numeric Timestamp"):
        traces.scan("burstgpt", cell, 10)
    with pytest.raises(ConfigError, match=r"cannot be read .*Fix: give an existing burstgpt trace file"):
        traces.scan("burstgpt", tmp_path / "missing.csv", 10)
    empty = tmp_path / "e.csv"
    empty.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,m,5,0,5,API log\n")
    with pytest.raises(ConfigError, match=r"holds no request to replay \(1 rows with 0 tokens skipped\)"):
        traces.scan("burstgpt", empty, 10)


def test_rows_are_read_lazily_and_only_as_many_as_the_load_uses(tmp_path: Path) -> None:
    good = [{"timestamp": i, "input_length": 8, "output_length": 4} for i in range(3)]
    path = _mooncake(tmp_path, [*good, "{broken"])
    assert traces.scan("mooncake", path, 3).rows == 3  # the broken 4th line is never read
    with pytest.raises(ConfigError, match="line 4 is not JSON"):
        traces.scan("mooncake", path, 4)
    long = tmp_path / "long.jsonl"
    long.write_text('{"timestamp": 0, "pad": "' + "x" * (traces.MAX_LINE + 10) + '"}\n')
    with pytest.raises(ConfigError, match="line 1 is longer than 1,048,576 characters"):
        traces.scan("mooncake", long, 1)


def test_a_large_trace_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("w") as fh:
        for i in range(30_000):
            fh.write(json.dumps({"timestamp": i, "input_length": 1024, "output_length": 8,
                                 "hash_ids": [i % 50, 1000 + i % 70]}) + "\n")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        found = traces.scan("mooncake", path, 30_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found.rows == 30_000
    # Rows are read one at a time: the 2.6 MB file is never held (the hash-id set is bounded too).
    assert peak < size / 10, (peak, size)


@pytest.mark.parametrize(("stamp", "scale", "message"), [
    (1e15, 1.0, "line 2 would be sent 1,000,000,000,000 s (31,688 years) after the first request, later than the "
                "longest load (604,800 s, 7.0 days). Fix: check the timestamps' unit (milliseconds in a mooncake "
                "trace); replay fewer rows (requests=N) or faster (trace_time_scale < 1)"),
    (2e9, 0.5, "line 2 would be sent 1,000,000 s (11.6 days) after the first request (its trace time x "
               "trace_time_scale 0.5), later than the longest load"),
])
def test_a_row_sent_after_the_longest_load_is_an_error_naming_its_line(tmp_path: Path, stamp: float, scale: float,
                                                                      message: str) -> None:
    path = _mooncake(tmp_path, [{"timestamp": 0, "input_length": 5, "output_length": 5},
                                {"timestamp": stamp, "input_length": 5, "output_length": 5}])
    with pytest.raises(ConfigError) as info:
        check_trace(LoadSpec(dataset=f"mooncake:{path}", trace_time_scale=scale))
    assert str(info.value).startswith(f"dataset='mooncake:{path}': {message}")


def test_a_trace_that_fits_in_the_longest_load_once_scaled_is_replayed(tmp_path: Path) -> None:
    path = _mooncake(tmp_path, [{"timestamp": 0, "input_length": 5, "output_length": 5},
                                {"timestamp": 2e9, "input_length": 5, "output_length": 5}])  # 23 days apart
    spec = LoadSpec(dataset=f"mooncake:{path}", trace_time_scale=0.25)  # 5.8 days
    found = check_trace(spec)
    assert found.span_s == 2e6 and 500_000 < spec.load_timeout(found.span_s * 0.25) <= 7 * 86_400


def test_a_trace_is_read_once_until_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _mooncake(tmp_path, [{"timestamp": i, "input_length": 8, "output_length": 4} for i in range(5)])
    spec = LoadSpec(dataset=f"mooncake:{path}", requests=100)
    first = check_trace(spec)
    real = traces._lines
    reads: list[Path] = []

    def counted(kind: str, file: Path) -> object:
        reads.append(file)
        return real(kind, file)

    monkeypatch.setattr(traces, "_lines", counted)
    # The command checks, run_load checks, the replay counts its rows: one read.
    assert check_trace(spec) == first and PromptSource(spec).trace == first and reads == []
    assert check_trace(spec.replace(requests=5)) == first and reads == []  # exactly its rows: the same read
    with path.open("a") as fh:
        fh.write(json.dumps({"timestamp": 9, "input_length": 8, "output_length": 4}) + "\n")
    assert check_trace(spec).rows == 6 and reads == [path]  # changed: read again


def test_a_long_check_reports_its_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traces, "PROGRESS_ROWS", 2)
    path = _mooncake(tmp_path, [{"timestamp": i, "input_length": 8, "output_length": 4} for i in range(5)])
    seen: list[int] = []
    assert traces.scan("mooncake", path, 10, progress=seen.append).rows == 5
    assert seen == [2, 4]


# ---- hash ids become real shared token prefixes ----------------------------------------------------------------
def test_equal_hash_ids_give_equal_token_prefixes_and_different_ones_do_not() -> None:
    a = traces.TraceRow(0.0, 1300, 8, (7, 8, 9), line=1)
    b = traces.TraceRow(0.0, 1100, 8, (7, 8, 10), line=2)
    c = traces.TraceRow(0.0, 600, 8, (11, 12), line=3)
    ia, ib, ic = (traces.prompt_ids(r, 1000, 42) for r in (a, b, c))
    assert (len(ia), len(ib), len(ic)) == (1300, 1100, 600)
    assert ia[:1024] == ib[:1024] and ia[1024:1100] != ib[1024:1100]
    assert ia[:MOONCAKE_BLOCK] != ic[:MOONCAKE_BLOCK]
    # The last block is cut to the prompt's length, and is the start of the same block elsewhere.
    assert ia[1024:] == traces.block_ids(9, 1000)[: 1300 - 1024]
    assert all(10 <= t < 1000 for t in ia)


def test_a_prompt_longer_than_its_blocks_gets_its_own_tail_and_chat_gets_text() -> None:
    row = traces.TraceRow(0.0, 700, 8, (1,), line=5)
    ids = traces.prompt_ids(row, 1000, 42)
    assert len(ids) == 700 and ids[:512] == traces.block_ids(1, 1000)
    chat = trace_prompt(LoadSpec(dataset=f"mooncake:{MOONCAKE}", api="chat"), row)
    assert isinstance(chat.prompt, str) and len(chat.prompt.split()) == 700 and chat.output_len == 8


# ---- cached tokens as SGLang reports them ----------------------------------------------------------------------
def _feed(api: str, lines: list[dict[str, object]]) -> RequestRecord:
    rec = RequestRecord(index=0, expected_output_len=1)
    reader = make_reader(api, rec, 0.0, True)
    for i, line in enumerate(lines):
        reader.feed(0.01 * (i + 1), json.dumps(line).encode())
    reader.feed(0.1, b"[DONE]")
    return reader.finish()


def test_cached_tokens_are_read_from_every_api() -> None:
    native = _feed("native", [{"text": "a", "output_ids": [5], "meta_info": {
        "prompt_tokens": 40, "completion_tokens": 1, "cached_tokens": 32, "finish_reason": {"type": "length"}}}])
    assert native.success and native.cached_tokens == 32 and native.prompt_len == 40
    chunk = {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "length"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 1,
                                      "prompt_tokens_details": {"cached_tokens": 16}}}
    assert _feed("chat", [chunk, usage]).cached_tokens == 16
    off = {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 1, "prompt_tokens_details": None}}
    assert _feed("chat", [chunk, off]).cached_tokens is None  # no --enable-cache-report: not reported, not 0
    sglext = {**usage, "sglext": {"cached_tokens_details": {"device": 8, "host": 4}}}
    assert _feed("completions", [{"choices": [{"index": 0, "text": "a", "finish_reason": "length"}]},
                                 sglext]).cached_tokens == 12


def test_the_cache_report_counts_every_request_exactly_even_when_records_are_sampled() -> None:
    collector = Collector(cap=3)
    for i in range(10):
        rec = RequestRecord(index=i, prompt_len=100, output_len=1, expected_output_len=1,
                            cached_tokens=None if i == 9 else 50)
        collector.add(rec)
    assert collector.sampled and len(collector.records) == 3
    report = cache_report(collector.cache, collector.cache_requests, collector.cache_unreported, {})
    assert report["total_prompt_tokens"] == 900 and report["total_cached_tokens"] == 450
    assert report["cache_hit_rate_pct"] == 50.0 and report["requests_not_reporting"] == 1
    server = cache_report([0, 0], 0, 4, {"cached_tokens": 30.0, "prompt_tokens": 120.0, "mean_cache_hit_rate": 0.5})
    assert server["cache_hit_rate_pct"] is None and server["server_cache_hit_rate_pct"] == 25.0
    assert server["server_mean_cache_hit_rate_pct"] == 50.0
    both = merge_cache_reports([report, report])
    assert both["total_cached_tokens"] == 900 and both["cache_hit_rate_pct"] == 50.0


def test_metrics_cache_figures_accept_both_prefixes() -> None:
    text = ('sglang:cached_tokens_total{cache_source="device"} 30\nsglang_cached_tokens_total{cache_source="host"} 10\n'
            'sglang:prompt_tokens_total{is_streaming="true"} 100\nsglang_cache_hit_rate{tp_rank="0"} 0.2\n'
            'sglang:cache_hit_rate{tp_rank="1"} 0.4\n')
    cached, prompt, rate = parse_cache(text)
    assert (cached, prompt) == (40.0, 100.0) and rate == pytest.approx(0.3)
    assert parse_cache("other_metric 1\n") == (0.0, 0.0, None)


def test_replay_timing_error_and_the_cap_are_in_the_result_and_its_lines() -> None:
    collector = Collector(cap=100)
    for i, late in enumerate((0.001, 0.002, 0.050)):
        collector.add(RequestRecord(index=i, start=i + late, scheduled=float(i), output_len=1, expected_output_len=1,
                                    prompt_len=10, cached_tokens=5))
    spec = LoadSpec(dataset=f"mooncake:{MOONCAKE}", requests=3)
    facts = {"trace": "mooncake", "rows": 3, "time_scale": 0.5, "span_s": 2.0, "in_flight_cap": 2, "cap_waits": 1,
             "skipped_rows": 0}
    result = LoadResult.from_collector(spec, collector, 3.0, workload=facts)
    err = result.workload["timing_error_ms"]
    assert err["p50"] == pytest.approx(2.0, abs=0.01) and err["max"] == pytest.approx(50.0, abs=0.01)
    lines = result.workload_lines()
    assert lines[0] == "prefix cache: hit 50.0% (cached_tokens 15 of 30 prompt tokens)"
    assert lines[1].startswith("replay: 3 mooncake rows x 0.5 time scale over 2 s; send timing error p50/p99/max "
                               "2.0/") and "in-flight cap 2 reached: 1 requests waited for room" in lines[1]
    again = LoadResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.cache_report == result.cache_report and again.workload == result.workload
