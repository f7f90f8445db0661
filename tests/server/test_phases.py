"""Startup phases from real SGLang 0.5.23 logs (captures) and older/synthetic variants."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from pytest_sglang import redaction
from pytest_sglang.server.phases import PHASES, LogFollower, PhaseTracker, log_tail
from pytest_sglang.server.progress import TerminalProgress, describe_ready, describe_state, format_duration

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures-0.5.23"


def _feed(lines: list[str]) -> PhaseTracker:
    tracker = PhaseTracker()
    for i, line in enumerate(lines):
        tracker.feed(line, float(i))
    return tracker


def test_real_0_5_23_start_is_followed_to_ready() -> None:
    report = _feed((CAPTURES / "basic" / "server.log").read_text().splitlines()).report
    names = [p.name for p in report.phases]
    assert names == [
        "launching",
        "loading weights",
        "allocating KV cache",
        "starting HTTP server",
        "warming up",
        "ready",
    ]
    assert report.kv_tokens == 4096 and report.max_total_num_tokens == 4096
    assert report.scheduler_info["context_len"] == "2048"
    assert report.scheduler_line is not None and report.scheduler_line.startswith("chunked_prefill_size=4096")
    assert report.uvicorn_url == "http://127.0.0.1:30012"
    assert report.ready_s is not None and report.fatal == []
    assert all(p.end_s is not None for p in report.phases)


def test_real_hicache_crash_on_cpu_is_explained() -> None:
    report = _feed((CAPTURES / "hicache" / "server.log").read_text().splitlines()).report
    assert report.phase == "allocating host pools"
    assert [(p.pool, p.tokens, p.gb) for p in report.host_pools] == [("kv", 3906251, 1.0)]
    fatal = report.primary_fatal
    assert fatal is not None and "Torch not compiled with CUDA enabled" in fatal.line
    assert "needs a CUDA GPU" in fatal.explanation


TP8_LINES = [
    "[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=78.52 GB",
    "[2026-01-01 10:00:01 TP0] Loading safetensors checkpoint shards:  50% Completed | 15/30 [00:21<00:21]",
    "[2026-01-01 10:00:02 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2858432, K size: 54.52 GB",
    "[2026-01-01 10:00:03 TP5] Load weight begin. avail mem=78.52 GB",  # a slow rank must not go back
    "[2026-01-01 10:00:04 TP0] Capture target decode CUDA graph begin. backend=full",
    "[2026-01-01 10:00:05 TP0] Capture target decode CUDA graph end. bs=[1, 2], elapsed=24.90 s",
    "[2026-01-01 10:00:06 TP0] max_total_num_tokens=2858432, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=4096, context_len=131072, available_gpu_mem=3.71 GB",
    "[2026-01-01 10:00:07 TP0] Allocating kv hierarchical KV host pool: 2929728 tokens, 120.00 GB host memory.",
    "[2026-01-01 10:00:07 TP7] Allocating kv hierarchical KV host pool: 2929728 tokens, 120.00 GB host memory.",
]


def test_tp8_lines_with_rank_prefixes() -> None:
    report = _feed(TP8_LINES).report
    assert report.shard_percent == 50 and report.shards == (15, 30)
    assert [p.name for p in report.phases][:4] == [
        "launching",
        "loading weights",
        "allocating KV cache",
        "capturing CUDA graphs",
    ]
    assert report.scheduler_info["available_gpu_mem"] == "3.71 GB"
    assert [p.rank for p in report.host_pools] == ["TP0", "TP7"]
    assert report.host_pool_gb_total() == 240.0


def test_older_0_4_formats() -> None:
    report = _feed(
        [
            "[2025-01-01 10:00:00 TP0] Init torch distributed begin.",
            "[2025-01-01 10:00:01 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.72 GB",  # noqa: E501 - a verbatim log line
            "[2025-01-01 10:00:02 TP0] KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB.",
            "[2025-01-01 10:00:03 TP0] Capture cuda graph begin. This can take up to several minutes.",
            "[2025-01-01 10:00:04 TP0] max_total_num_tokens=444500, max_prefill_tokens=16384, "
            "max_running_requests=2049, context_len=131072",
            "[2025-01-01 10:00:05 TP0] Allocating 73.61 GB host memory for hierarchical KV cache.",
            "[2025-01-01 10:00:06] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
            "[2025-01-01 10:00:07] The server is fired up and ready to roll!",
        ]
    ).report
    assert report.kv_tokens is None and report.max_total_num_tokens == 444500
    assert report.host_pools[0].gb == 73.61 and report.host_pools[0].tokens is None
    assert report.phase == "ready" and report.uvicorn_url == "http://0.0.0.0:30000"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "ValueError: Not enough host memory available. Requesting 300.00 GB but only have 49.66 GB free. Please "
            "reduce the size of the hierarchical cache.",
            "--hicache-size is GB per TP rank: every scheduler process (tp x pp x dp ranks) pins its own host pool. "
            "This rank asked for 300.00 GB but its share of host memory ((available - 10 GiB) / ranks on this host) "
            "is 49.66 GB.",
        ),
        (
            "Rank 3 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause",
            "most likely by the out-of-memory killer",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "the GPU ran out of memory",
        ),
        (
            "[Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
            "another process already listens on this port",
        ),
        ("Initialization failed. warmup error: Traceback", "the server's own warmup request failed"),
    ],
)
def test_known_fatal_lines_are_explained(line: str, expected: str) -> None:
    report = _feed(
        [
            "[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=1 GB",
            line,
            "[2026-01-01 10:00:01] Received sigquit from a child process. It usually means the child failed.",
        ]
    ).report
    fatal = report.primary_fatal
    assert fatal is not None and expected in fatal.explanation
    assert fatal.message().startswith("Known fatal line: ")


def test_log_follower_reads_incrementally_and_keeps_partial_lines(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_bytes(
        b"[2026-01-01 10:00:00] Load weight begin. avail mem=1 GB\n[2026-01-01 10:00:01] KV Cache is al"
    )
    seen: list[str] = []
    follower = LogFollower(log, on_update=lambda r: seen.append(r.phase))
    assert follower.poll() and follower.report.phase == "loading weights"
    with log.open("ab") as fh:
        fh.write(b"located. dtype: x, #tokens: 77, K size\n")
    assert follower.poll() and follower.report.kv_tokens == 77
    assert not follower.poll()
    assert seen == ["loading weights", "allocating KV cache"]


def test_log_follower_thread_reports_changes(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("")
    seen: list[str] = []
    follower = LogFollower(log, on_update=lambda r: seen.append(r.phase), interval_s=0.02).start()
    with log.open("a") as fh:
        fh.write(
            "[2026-01-01 10:00:00] INFO:     Uvicorn running on http://127.0.0.1:1 (Press CTRL+C to quit)\n"
        )
    deadline = time.monotonic() + 5
    while "warming up" not in seen and time.monotonic() < deadline:
        time.sleep(0.02)
    report = follower.stop()
    assert "warming up" in seen and report.uvicorn_url == "http://127.0.0.1:1"


def test_log_tail_is_scrubbed_and_shortened(tmp_path: Path) -> None:
    redaction.register("tail-secret-123")
    log = tmp_path / "s.log"
    log.write_text(
        "".join(f"line {i}\n" for i in range(50))
        + "server_args={'api_key': 'tail-secret-123', "
        + "'x': 1, " * 200
        + "}\n"
    )
    tail = log_tail(log, 3)
    assert tail[:2] == ["line 48", "line 49"]
    assert "tail-secret-123" not in tail[2] and "***" in tail[2] and len(tail[2]) == 300
    assert log_tail(tmp_path / "missing.log") == [] and log_tail(None) == []


def test_server_text_in_messages_has_no_escape_sequences_or_control_characters(tmp_path: Path) -> None:
    # A hostile (or merely colourful) server must not retitle the terminal, move the cursor or hide lines.
    hostile = ("\x1b]0;pwned\x07\x1b[2J\x1b[HValueError: \x1b[31mboom\x1b[0m\x00\x08\u202eevil\n"
               "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ done\x1bc\n")
    log = tmp_path / "sglang.log"
    log.write_text(hostile)
    assert log_tail(log, 5) == ["ValueError: boomevil", "link done"]
    tracker = PhaseTracker()
    tracker.feed(hostile.splitlines()[0], 1.0)
    assert tracker.report.last_exception == "ValueError: boomevil"
    assert redaction.clean_text("tab\tand\nnewline stay\r") == "tab\tand\nnewline stay"


def test_phase_names_are_ordered() -> None:
    assert PHASES[0] == "launching" and PHASES[-1] == "ready"


def test_progress_lines() -> None:
    report = _feed(TP8_LINES[:2]).report
    assert describe_state(report, 130.0) == "[sglang 2m10s] loading weights 50% (15/30 shards)"
    report = _feed(TP8_LINES).report
    line = describe_state(report, 5.0)
    assert "| KV pool 2,858,432 tokens" in line and "| host pools 2 x 120.00 GB" in line
    report.ready_s = 662.0
    ready = describe_ready(report, "http://h:1")
    assert ready.startswith("SGLang ready in 11m02s at http://h:1 (max_total_num_tokens=2,858,432; ")
    assert format_duration(3723) == "1h02m03s" and format_duration(42.13) == "42.1s"


def test_terminal_progress_writes_only_changes() -> None:
    lines: list[str] = []
    sink = TerminalProgress(lines.append, heartbeat_s=3600)
    report = _feed(TP8_LINES[:1]).report
    sink.update(report)
    sink.update(report)
    assert len(lines) == 1 and lines[0].endswith("] loading weights")
    report.ready_s = 1.5
    sink.done(report)
    assert lines[-1].startswith("SGLang ready in 1.5s")


def test_a_broken_progress_sink_is_dropped_not_fatal(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("[2026-01-01 10:00:00] Load weight begin. avail mem=1 GB\n")

    def broken(_: object) -> None:
        raise RuntimeError("display bug")

    follower = LogFollower(log, on_update=broken)
    assert follower.poll() and follower.on_update is None


def test_heartbeat_repeats_the_state_while_a_phase_lasts(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("[2026-01-01 10:00:00] Load weight begin. avail mem=1 GB\n")
    seen: list[str] = []
    follower = LogFollower(log, on_update=lambda r: seen.append(r.phase), interval_s=0.02, heartbeat_s=0.1)
    follower.start()
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    follower.stop()
    assert seen[:3] == ["loading weights"] * 3


def test_docker_image_pull_is_its_own_phase_before_the_weights() -> None:
    report = _feed([
        "# pytest-sglang 2026-01-01 10:00:00: pulling image lmsysorg/sglang:v0.5.23 (--sglang-pull missing)",
        "# pytest-sglang 2026-01-01 10:00:01: pull lmsysorg/sglang:v0.5.23: 3f1e: Download complete",
        "# pytest-sglang 2026-01-01 10:03:00: docker run lmsysorg/sglang:v0.5.23 python3 -m sglang.launch_server",
        *TP8_LINES[:1],
    ]).report
    assert [(p.name, p.start_s, p.end_s) for p in report.phases] == [
        ("launching", 0.0, 0.0), ("pulling image", 0.0, 3.0), ("loading weights", 3.0, None)]


@pytest.mark.parametrize("line", [
    "# pytest-sglang 2026-01-01 10:00:00: python -m sglang.launch_server --model-path pulling",
    "[2026-01-01 10:00:00] # pytest-sglang x: pulling image y",  # only our own lines, from their start
])
def test_other_lines_do_not_start_the_pull_phase(line: str) -> None:
    assert _feed([line]).report.phase == "launching"


def test_terminal_progress_notes_are_stamped_like_status_lines() -> None:
    lines: list[str] = []
    TerminalProgress(lines.append).note("pull img: 3f1e: Download complete")
    assert re.fullmatch(r"\[sglang \d+\.\ds\] pull img: 3f1e: Download complete", lines[0]), lines
