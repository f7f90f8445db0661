"""Unit tests: records, fingerprints, regression arithmetic, limits parsing."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import sample

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.base import Check
from pytest_sglang.report import baseline, fingerprint, identity, records


def _report(
    nodeid: str,
    when: str,
    props: list[tuple[str, object]],
    *,
    failed: bool = False,
    skipped: bool = False,
    worker: str | None = None,
) -> SimpleNamespace:
    node = SimpleNamespace(gateway=SimpleNamespace(id=worker)) if worker else None
    return SimpleNamespace(
        nodeid=nodeid,
        when=when,
        user_properties=props,
        duration=0.5,
        failed=failed,
        skipped=skipped,
        passed=not failed and not skipped,
        node=node,
        longreprtext="AssertionError: sglang capacity gate failed: x\n  more",
        longrepr=None,
    )


def test_collector_merges_phases_without_duplicates_and_keeps_worker() -> None:
    props = sample.props([sample.throughput_outcome(900.0, 500.0)], [sample.load(8, 900.0)])
    collector = records.RecordCollector()
    collector.add_report(_report("t.py::a", "setup", props[:1], worker="gw1"))
    collector.add_report(_report("t.py::a", "call", props, worker="gw1"))  # call repeats setup's properties
    collector.add_report(_report("t.py::a", "teardown", props, worker="gw1"))
    rec = collector.tests["t.py::a"]
    assert (len(rec.gates), len(rec.loads), rec.worker, rec.outcome) == (1, 1, "gw1", "passed")
    assert rec.properties == {"sglang.throughput.output_throughput": 900.0}
    assert rec.duration_s == pytest.approx(1.5)
    row = rec.rows()[0]
    assert (row.check.metric, row.check.measured, row.load_shape) == (
        "output_throughput",
        900.0,
        "concurrency=8 requests=32",
    )


@pytest.mark.parametrize(
    ("when", "failed", "skipped", "expected"),
    [
        ("call", True, False, "failed"),
        ("setup", True, False, "error"),
        ("teardown", True, False, "error"),
        ("setup", False, True, "skipped"),
        ("call", False, False, "passed"),
    ],
)
def test_outcome_of_a_test(when: str, failed: bool, skipped: bool, expected: str) -> None:
    collector = records.RecordCollector()
    rec = collector.add_report(_report("t.py::a", when, [], failed=failed, skipped=skipped))
    assert rec.outcome == expected
    assert rec.message == ("AssertionError: sglang capacity gate failed: x" if failed else "")


def test_bad_property_json_names_the_property() -> None:
    with pytest.raises(ValueError, match=r"user property 'sglang_load' is not JSON .*: '\{nope'"):
        records.parse_properties([("sglang_load", "{nope")])


def test_load_shape_from_spec_and_from_bench_serving_names() -> None:
    assert records.load_shape(sample.load(4, 1.0)) == (
        "api=native concurrency=4 requests=32 input_len=64 output_len=16 dataset=random-ids"
    )
    bench = {"backend": "sglang", "max_concurrency": 16, "request_rate": None, "concurrency": 15.2}
    assert (
        records.load_shape(bench) == "backend=sglang max_concurrency=16"
    )  # measured concurrency is not shape


def test_record_round_trip() -> None:
    rec = sample.tests()[3]
    again = records.TestRecord.from_dict(json.loads(json.dumps(rec.to_dict(requests=True))))
    assert again.to_dict(requests=True) == rec.to_dict(requests=True)
    assert "records" not in rec.to_dict()["loads"][0]


def test_normalise_args_sorts_and_drops_volatile_flags() -> None:
    argv = [
        "--model-path",
        "m",
        "--tp",
        "2",
        "--port=30000",
        "--host",
        "0.0.0.0",
        "--api-key",
        "k",
        "--enable-hierarchical-cache",
        "--page-size=64",
    ]
    assert fingerprint.normalise_args(argv) == ["--enable-hierarchical-cache", "--page-size 64", "--tp 2"]
    assert fingerprint.normalise_args(["--page-size", "64", "--tp", "2"]) == fingerprint.normalise_args(
        ["--tp", "2", "--page-size", "64", "--port", "1"]
    )


def test_normalise_args_reads_abbreviations_as_sglang_does() -> None:
    # --po is --port and --api-ke is --api-key to SGLang: dropped like the full flags, never shown.
    assert fingerprint.normalise_args(["--tp", "2", "--po", "1", "--api-ke", "sk-x", "--sim-time-scale", "3"]) == [
        "--sim-time-scale 3", "--tp 2"]


def test_fingerprint_splits_the_setup_from_what_a_candidate_changes() -> None:
    old = fingerprint.fingerprint(sample.identity())
    assert old == {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu_model": "H100 80GB (simulated)",
        "gpu_count": 2,
        "host": "2 CPUs, 24.0 GB RAM",  # not the host name: CI runners get a new one every run
        "sglang_version": "0.5.23",
        "image": None,
        "runner": "simulator",
        "launch_args": ["--tp 2"],
    }
    other_setup = fingerprint.fingerprint(sample.identity(gpu_model="A100", gpu_count=4))
    assert fingerprint.incomparable(old, other_setup) == [
        "gpu_model: 'H100 80GB (simulated)' (baseline) != 'A100' (this run)",
        "gpu_count: 2 (baseline) != 4 (this run)",
    ]
    candidate = fingerprint.fingerprint(
        sample.identity(sglang_version="0.5.24", launch_args=["--tp", "2", "--enable-metrics", "--page-size", "64"],
                        host={"hostname": "ci-2", "cpus": 2, "memory_gb": 24.0})
    )
    assert fingerprint.incomparable(old, candidate) == []
    assert [c.line() for c in fingerprint.changes(old, candidate)] == [
        "sglang_version: 0.5.23 -> 0.5.24",
        "launch_args: (none) -> --enable-metrics --page-size 64",
    ]
    assert fingerprint.changes(old, old) == [] and fingerprint.incomparable(old, old) == []


def test_a_baseline_written_before_a_field_existed_is_not_incomparable_for_it() -> None:
    new = fingerprint.fingerprint(sample.identity())
    old = {k: v for k, v in new.items() if k not in ("host", "image")}
    assert fingerprint.incomparable(old, new) == [] and fingerprint.changes(old, new) == []


def test_identity_from_a_handle_scrubs_and_reads_server_reported_startup() -> None:
    info = {
        "version": "0.5.23",
        "model_path": "m",
        "tp_size": 2,
        "dp_size": 1,
        "device": "cuda",
        "api_key": "sk-abcdef",
        "launch_command": "--model-path m --tp 2 --api-key sk-abcdef",
        "startup_time": {
            "load_weight": 4.0,
            "kv_cache_allocation": 1.0,
            "cuda_graph": {"prefill": 2.0, "decode": 3.0},
            "tokenizer_e2e": 12.0,
        },
    }
    server = SimpleNamespace(initial_info=None, info=lambda: info, mode="attach", config=None, startup=None, url="http://h:1")
    ident = identity.identify(server)
    assert ident.launch_args == ["--model-path", "m", "--tp", "2", "--api-key", "***"]
    assert (ident.runner, ident.gpu_count, ident.host) == ("attach", 2, {})
    assert [(p.name, p.start_s, p.end_s) for p in ident.phases] == [
        ("load_weight", 0.0, 4.0),
        ("kv_cache_allocation", 4.0, 5.0),
        ("cuda_graph.prefill", 5.0, 7.0),
        ("cuda_graph.decode", 7.0, 10.0),
        ("other (tokenizer_e2e)", 10.0, 12.0),
    ]
    assert ident.ready_s == 12.0


def test_identity_of_a_docker_candidate_masks_keys_in_every_spelling_and_names_the_image() -> None:
    from pytest_sglang.server.config import DockerOptions, LaunchConfig

    key = "sk-abbrev-9f8e7d6c"
    config = LaunchConfig(runner="docker", args=("--model-path", "m", "--api-ke", key, "--tp", "2"),
                          docker=DockerOptions(image="lmsysorg/sglang:v0.5.24"))
    info = {"version": "0.5.24", "model_path": "m\x1b[31m", "tp_size": 2}
    server = SimpleNamespace(initial_info=None, info=lambda: info, mode="docker", config=config, startup=None, url="http://h:1")
    ident = identity.identify(server)
    assert ident.launch_args == ["--model-path", "m", "--api-ke", "***", "--tp", "2"]
    assert (ident.image, ident.model) == ("lmsysorg/sglang:v0.5.24", "m")  # escape sequence stripped
    found = fingerprint.fingerprint(ident)
    assert found["image"] == "lmsysorg/sglang:v0.5.24" and found["launch_args"] == ["--tp 2"]
    assert key not in repr(ident.to_dict()) + repr(found)


def test_identity_never_raises_when_info_fails() -> None:
    def boom() -> dict[str, object]:
        raise RuntimeError("down")

    ident = identity.identify(SimpleNamespace(initial_info=None, info=boom, mode="process", config=None,
                                              startup=None, url=None))
    assert (ident.sglang_version, ident.runner, ident.phases) == (None, "process", [])


@pytest.mark.parametrize(
    ("metric", "old", "new", "pct"),
    [
        ("output_throughput", 1000.0, 900.0, 10.0),  # 10% less throughput = 10% worse
        ("output_throughput", 1000.0, 1100.0, -10.0),  # faster = negative regression
        ("p99_ttft_ms", 100.0, 125.0, 25.0),  # latency up = worse
        ("p99_ttft_ms", 100.0, 80.0, -20.0),
    ],
)
def test_regression_pct(metric: str, old: float, new: float, pct: float) -> None:
    assert baseline.regression_pct(metric, old, new) == pytest.approx(pct)


def test_bound_is_the_worst_allowed_value() -> None:
    assert baseline.bound("output_throughput", 1000.0, 5.0) == pytest.approx(950.0)
    assert baseline.bound("p99_ttft_ms", 200.0, 10.0) == pytest.approx(220.0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5%", {m: 5.0 for m in baseline.DEFAULT_METRICS}),
        ("output_throughput:5%,p99_ttft_ms:10%", {"output_throughput": 5.0, "p99_ttft_ms": 10.0}),
        ("output_throughput: 2.5 %", {"output_throughput": 2.5}),
        (
            "p99_ttft_ms:20%,3%",
            {"p99_ttft_ms": 20.0, **{m: 3.0 for m in baseline.DEFAULT_METRICS if m != "p99_ttft_ms"}},
        ),
    ],
)
def test_parse_limits(text: str, expected: dict[str, float]) -> None:
    assert dict(baseline.parse_limits(text).per_metric) == expected


def test_parse_limits_error_names_option_value_and_fix() -> None:
    with pytest.raises(ConfigError) as err:
        baseline.parse_limits("output_throughput=5")
    assert str(err.value) == (
        "--sglang-max-regression='output_throughput=5': cannot read 'output_throughput=5'. Fix: write a "
        "percentage like 5% or metric:percent pairs like output_throughput:5%,p99_ttft_ms:10%"
    )


@pytest.mark.parametrize(("text", "twice"), [
    ("p99_ttft_ms:5%,p99_ttft_ms:10%", "p99_ttft_ms is given twice (p99_ttft_ms:5% and p99_ttft_ms:10%)"),
    ("max_ttft_ms_p99:5%,p99_ttft_ms:10%", "p99_ttft_ms is given twice (max_ttft_ms_p99:5% and p99_ttft_ms:10%)"),
    ("5%,10%", "the bare percentage is given twice (5% and 10%)"),
])
def test_parse_limits_refuses_a_metric_given_twice(text: str, twice: str) -> None:
    # Before: the last one won silently ("p99_ttft_ms:5%,p99_ttft_ms:10%" judged at 10%).
    with pytest.raises(ConfigError) as err:
        baseline.parse_limits(text)
    assert str(err.value) == (f"--sglang-max-regression={text!r}: {twice}. Fix: give each metric (and the bare "
                              "percentage for the rest) once")


def test_compare_loads_fails_a_slower_run_with_both_values_and_the_limit() -> None:
    limits = baseline.parse_limits("output_throughput:5%,p99_ttft_ms:10%")
    outcome = baseline.compare_loads("t::a", [sample.load(8, 1000.0)], [sample.load(8, 940.0)], limits)
    assert outcome is not None and not outcome.passed
    failed = outcome.failed[0]
    assert (failed.metric, failed.measured, failed.op, failed.required) == (
        "output_throughput",
        940.0,
        ">=",
        950.0,
    )
    message = outcome.message()
    assert message.startswith(
        "sglang baseline gate failed: output_throughput 940.0 tok/s (required >= 950.0)"
    )
    assert "baseline 1,000.0, this run 940.0 (-6.0%), no interval: no noise was measured" in message
    assert "allowed regression 5%: regressed when the change is beyond it and beyond the noise" in message
    # A p99 of 32 requests is about their maximum: not compared, and said so.
    assert [c.metric for c in outcome.checks] == ["output_throughput"]
    assert "p99_ttft_ms not compared: p99_ttft_ms from 32 requests is unreliable: a p99 needs at least 100" in message


def test_compare_loads_repeats_use_the_median_and_skip_failed_runs() -> None:
    limits = baseline.parse_limits("output_throughput:5%")
    old = [sample.load(8, v) for v in (1000.0, 1010.0, 400.0)]  # one noisy repeat
    assert baseline.compare_loads("t", old, [sample.load(8, 990.0)], limits).passed  # type: ignore[union-attr]
    failed_run = baseline.compare_loads("t", old, [sample.load(8, 10.0, failed=3)], limits)
    assert failed_run is not None and failed_run.checks == []
    assert failed_run.notes == [
        "load api=native concurrency=8 requests=32 input_len=64 output_len=16 "
        "dataset=random-ids: not compared, requests failed in one of the runs"
    ]


def test_another_workload_is_not_compared_and_fails_only_strict() -> None:
    limits = baseline.parse_limits("5%")
    old, new = [sample.load(4, 1000.0)], [sample.load(8, 10.0)]
    warned = baseline.compare_loads("t", old, new, limits)
    assert warned is not None and warned.checks == [] and warned.passed
    assert warned.notes == [
        "not compared, the workload differs: this run: api=native concurrency=8 requests=32 input_len=64 "
        "output_len=16 dataset=random-ids; the baseline ran: api=native concurrency=4 requests=32 input_len=64 "
        "output_len=16 dataset=random-ids"
    ]
    strict = baseline.compare_test("t", {"loads": old}, new, (), limits, strict=True)
    assert strict is not None and [(c.metric, c.passed) for c in strict.checks] == [("workload", False)]
    assert strict.message().startswith("sglang baseline gate failed: workload differs (required == equal)")
    # A test the baseline did not run at all is simply not compared.
    assert baseline.compare_loads("t", [], new, limits) is None


def test_compare_test_checks_capacity_figures_with_the_same_limits() -> None:
    old = {"gates": [sample.capacity_outcome(tokens=4096).to_dict(), sample.hicache_outcome().to_dict()]}
    new = [sample.capacity_outcome(tokens=3500), sample.hicache_outcome()]
    outcome = baseline.compare_test("t::cap", old, [], new, baseline.parse_limits("5%"), baseline_name="b.json")
    assert outcome is not None
    # Numeric figures with a limit only: hicache's enable_hierarchical_cache (a bool) is not compared.
    assert [(c.metric, c.measured, c.op, c.required, c.unit, c.passed) for c in outcome.checks] == [
        ("max_total_num_tokens", 3500.0, ">=", pytest.approx(3891.2), "tok", False),
        ("max_running_requests", 48.0, ">=", pytest.approx(45.6), "req", True),
        ("host_pool_tokens", 8192.0, ">=", pytest.approx(7782.4), "tok", True),
    ]
    assert outcome.checks[0].source == "capacity gate record vs baseline report"
    assert outcome.notes == [
        "max_total_num_tokens: baseline 4,096, this run 3,500 (-14.6%), allowed regression 5%; "
        "capacity gate record",
        "limits: max_total_num_tokens 5%, max_running_requests 5%, host_pool_tokens 5% "
        "(--sglang-max-regression) against b.json",
    ]
    assert "--mem-fraction-static" in outcome.message()
    # Only metrics named in the limits are compared; baseline records are never compared again.
    only_tput = baseline.parse_limits("output_throughput:5%")
    assert baseline.compare_test("t::cap", old, [], new, only_tput) is None
    again = [*new, outcome]
    assert len(baseline.compare_test("t", old, [], again, baseline.parse_limits("5%")).checks) == 3  # type: ignore[union-attr]


def test_a_larger_pool_is_no_regression() -> None:
    old = {"gates": [sample.capacity_outcome(tokens=4096).to_dict()]}
    bigger = baseline.compare_test("t", old, [], [sample.capacity_outcome(tokens=8192)],
                                   baseline.parse_limits("max_total_num_tokens:0%"))
    assert bigger is not None and bigger.passed and len(bigger.checks) == 1


def _context(strict: bool) -> baseline.BaselineContext:
    old_test = {"nodeid": "t", "loads": [sample.load(8, 1000.0)]}
    report = {"tests": [old_test], "fingerprint": fingerprint.fingerprint(sample.identity())}
    return baseline.BaselineContext("base.json", report, baseline.parse_limits("output_throughput:5%"), strict)


@pytest.mark.parametrize("strict", [False, True])
def test_a_slower_candidate_is_compared_and_says_what_it_changes(strict: bool) -> None:
    candidate = fingerprint.fingerprint(sample.identity(launch_args=["--tp", "2", "--sim-time-scale", "3"]))
    outcome = _context(strict).outcome("t", [sample.load(8, 300.0)], [], candidate)
    assert outcome is not None and not outcome.passed
    message = outcome.message()
    assert message.splitlines()[0] == "sglang baseline gate failed: output_throughput 300.0 tok/s (required >= 950.0)"
    assert "  candidate vs baseline: launch_args: (none) -> --sim-time-scale 3" in message.splitlines()
    summary = _context(strict).summary(candidate)
    assert summary["comparable"] and summary["fingerprint_differences"] == []
    assert summary["candidate_changes"] == [
        {"field": "launch_args", "baseline": "(none)", "candidate": "--sim-time-scale 3"}]


def test_another_setup_is_not_compared_and_fails_only_strict() -> None:
    other_model = fingerprint.fingerprint(sample.identity(model="Qwen/Qwen3-8B"))
    slow = [sample.load(8, 300.0)]
    assert _context(strict=False).outcome("t", slow, [], other_model) is None  # the summary warns
    outcome = _context(strict=True).outcome("t", slow, [], other_model)
    assert outcome is not None and [c.metric for c in outcome.checks] == ["fingerprint"]
    assert outcome.message().splitlines()[0] == "sglang baseline gate failed: fingerprint differs (required == equal)"
    assert "model: 'meta-llama/Llama-3.1-8B-Instruct' (baseline) != 'Qwen/Qwen3-8B' (this run)" in outcome.message()
    assert "Fix: compare on the same model, GPU and host, refresh the baseline base.json" in outcome.message()
    summary = _context(strict=False).summary(other_model)
    assert not summary["comparable"] and summary["candidate_changes"] == []


def test_load_report_errors(tmp_path: object) -> None:
    from pathlib import Path

    bad = Path(str(tmp_path)) / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match=r"not a pytest-sglang report .*Fix: point it to a JSON report"):
        baseline.load_report(bad)


def test_check_describe_of_a_baseline_row() -> None:
    check = Check("baseline", "p99_ttft_ms", 120.0, 110.0, "<=", unit="ms", passed=False)
    assert check.describe() == "p99_ttft_ms: measured 120.0 ms, required <= 110.0 ms: FAILED"


def test_local_gpu_model_from_nvidia_smi(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    fake = Path(str(tmp_path)) / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3'\necho 'NVIDIA H100 80GB HBM3'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    server = SimpleNamespace(initial_info=None, info=lambda: {"tp_size": 2, "device": "cuda"}, mode="process",
                             config=None, startup=None, url=None)
    ident = identity.identify(server)
    assert (ident.gpu_model, ident.gpu_count) == ("NVIDIA H100 80GB HBM3", 2)
    monkeypatch.setenv("PATH", str(Path(str(tmp_path)) / "empty"))
    assert identity.local_gpu_model() is None


def test_identity_of_a_fleet_describes_every_worker_not_worker_0() -> None:
    """Attached to a gateway, the header showed worker 0's --port and "GPU 1 x unknown model" for the fleet."""
    from pathlib import Path

    from pytest_sglang.fleet.discovery import WorkerEntry
    from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
    from pytest_sglang.report import text
    from pytest_sglang.server.handle import SGLangServer

    base = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "server_info" / "sglang-0.5.23.json")
                      .read_text())
    workers = []
    for index, (port, tp) in enumerate([(31001, 2), (31002, 2), (31003, 4)]):
        url = f"http://127.0.0.1:{port}"
        info = {**base, "port": port, "tp_size": tp, "dp_size": 1, "pp_size": 1, "device": "cuda",
                "model_path": "org/model", "launch_command": f"python -m sglang.launch_server --model-path org/model "
                                                             f"--port {port} --host=127.0.0.1 --tp {tp}"}
        server = SGLangServer(url, "attach", initial_info=info)
        workers.append(WorkerHandle(index, WorkerEntry(url, "regular", True), server=server))
    fleet = SGLangFleet(SGLangServer("http://127.0.0.1:30000", "attach"), "smg", workers, version="1.13.0")
    ident = identity.identify(fleet)
    assert (ident.url, ident.model, ident.sglang_version) == ("http://127.0.0.1:30000", "org/model", base["version"])
    assert ident.tp_size is None  # the workers differ: not one worker's figure
    assert ident.gpu_count == 8  # 2 + 2 + 4
    assert ident.launch_args == []  # their commands differ by --tp: no one worker's command stands for all
    assert text.hardware(ident.to_dict()) == "GPU 8 x unknown model"
    assert "31001" not in json.dumps(ident.to_dict())
    # Workers launched alike: their common command without any worker's own address.
    for worker in workers:
        assert worker.server is not None and worker.server.initial_info is not None
        worker.server.initial_info["tp_size"] = 2
        worker.server.initial_info["launch_command"] = worker.server.initial_info["launch_command"].replace(
            "--tp 4", "--tp 2")
    ident = identity.identify(fleet)
    assert ident.launch_args == ["python", "-m", "sglang.launch_server", "--model-path", "org/model", "--tp", "2"]
    assert (ident.tp_size, ident.gpu_count) == (2, 6)
