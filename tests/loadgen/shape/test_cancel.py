"""Cancellation storms in the load generator (issue 33 item 4): the keywords, the seeded choice, and a run.

A cancelled request's client closes its stream after ``cancel_after_tokens``; it is counted apart
(``LoadResult.cancelled``), never as an error, and in no figure.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.sim_model import MODEL
from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.measure.collect import Collector
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.shape.cancel import cancel_count, cancelled_indices

BAD = [
    (dict(cancel_rate=1.5), "LoadSpec.cancel_rate=1.5: must be a fraction of the requests from 0 to 1"),
    (dict(cancel_rate=-0.1), "LoadSpec.cancel_rate=-0.1: must be a fraction"),
    (dict(cancel_rate=True), "LoadSpec.cancel_rate=True: must be a fraction"),
    (dict(cancel_rate="0.2"), "LoadSpec.cancel_rate='0.2': must be a fraction"),
    (dict(cancel_rate=float("nan")), "LoadSpec.cancel_rate=nan: must be a fraction"),
    (dict(cancel_rate=0.5, cancel_after_tokens=0), "LoadSpec.cancel_after_tokens=0: must be a whole number"),
    (dict(cancel_rate=0.5, cancel_after_tokens=-3), "LoadSpec.cancel_after_tokens=-3: must be a whole number"),
    (dict(cancel_rate=0.5, cancel_after_tokens=2.5), "LoadSpec.cancel_after_tokens=2.5: must be a whole number"),
    (dict(cancel_after_tokens=4), "LoadSpec.cancel_after_tokens=4: cancels nothing without cancel_rate"),
    (dict(cancel_rate=0.5, cancel_after_tokens=32), "LoadSpec.cancel_after_tokens=32: is not below output_len=32: "
                                                    "the answer ends before the client goes away"),
    (dict(cancel_rate=0.5, output_len=1), "LoadSpec.cancel_after_tokens=1: is not below output_len=1"),
    (dict(cancel_rate=0.01), "LoadSpec.cancel_rate=0.01: of requests=10 cancels no request"),
    (dict(cancel_rate=0.5, dataset="multiturn", api="chat"), "LoadSpec.cancel_rate=0.5: applies to random-ids"),
]


@pytest.mark.parametrize(("fields", "message"), BAD)
def test_bad_cancel_values_are_refused_with_the_fix(fields: dict[str, Any], message: str) -> None:
    shape: dict[str, Any] = {"requests": 10, "output_len": 32, **fields}
    with pytest.raises(ConfigError) as info:
        LoadSpec(**shape)
    assert str(info.value).startswith(message)
    assert "Fix: " in str(info.value)


def test_the_share_is_exact_and_seeded() -> None:
    chosen = cancelled_indices(100, 0.2, seed=42)
    assert len(chosen) == cancel_count(100, 0.2) == 20 and chosen <= set(range(100))
    assert chosen == cancelled_indices(100, 0.2, seed=42)  # every client process picks the same requests
    assert chosen != cancelled_indices(100, 0.2, seed=43)
    assert cancelled_indices(100, 0.0, seed=42) == frozenset()
    assert LoadSpec(requests=10, output_len=32, cancel_rate=0.5).cancel_after() == 16  # default: half the answer


def test_a_cancelled_record_is_in_no_figure() -> None:
    collector = Collector(cap=100)
    done = RequestRecord(index=0, ttft=0.1, e2e=1.0, output_len=8, prompt_len=4, itl=[0.1] * 7)
    gone = RequestRecord(index=1, ttft=9.0, e2e=9.0, output_len=0, prompt_len=4, cancelled=True)
    collector.add(done)
    collector.add(gone)
    metrics = collector.metrics(1.0)
    assert (metrics["completed"], metrics["failed"], collector.cancelled) == (1, 0, 1)
    assert metrics["median_ttft_ms"] == pytest.approx(100.0)
    assert not gone.success


def test_run_counts_cancelled_apart(sim_factory: Any) -> None:
    sim = sim_factory(*MODEL)
    spec = LoadSpec(requests=10, concurrency=5, input_len=32, output_len=32, cancel_rate=0.3, cancel_after_tokens=4)
    result = run_load(sim.url, spec)
    assert (result.completed, result.failed, result.cancelled, result.errors) == (7, 0, 3, {})
    assert result.total_output_tokens == 7 * 32  # the cancelled streams' tokens are in no figure
    assert result.total == 10 and result.to_dict()["cancelled"] == 3
    assert all(not r.cancelled for r in result.records)


@pytest.mark.parametrize(("flags", "message"), [
    (["--cancel-rate", "1.5"], "error: LoadSpec.cancel_rate=1.5: must be a fraction of the requests from 0 to 1"),
    (["--cancel-rate", "0.5", "--cancel-after-tokens", "0"], "error: LoadSpec.cancel_after_tokens=0: must be"),
    (["--cancel-rate", "0.5", "--cancel-after-tokens", "8"], "error: LoadSpec.cancel_after_tokens=8: is not below "
                                                             "output_len=8"),
])
def test_load_command_refuses_bad_cancel_flags(flags: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_sglang.cli.load import main

    argv = ["--url", "http://x", "--concurrency", "2", "--requests", "4", "--input-len", "8", "--output-len", "8"]
    with pytest.raises(SystemExit) as info:
        main([*argv, *flags])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_load_command_prints_the_cancelled_requests(sim_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_sglang.cli.load import main

    sim = sim_factory(*MODEL)
    code = main(["--url", sim.url, "--concurrency", "2", "--requests", "4", "--input-len", "8", "--output-len", "16",
                 "--cancel-rate", "0.5", "--cancel-after-tokens", "2"])
    out = capsys.readouterr().out
    assert code == 0, out  # cancelled requests are not failures
    assert "Cancelled requests:" in out and "Successful requests:" in out
    assert [line.split()[-1] for line in out.splitlines() if line.startswith(("Successful", "Cancelled"))] == ["2", "2"]
