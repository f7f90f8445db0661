"""``python -m pytest_sglang load``: argparse-style errors, the summary table, --json, exit codes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.loadgen_fake import FakeServer
from pytest_sglang.cli.load import main
from tests.conftest import SimFactory

BASE = ["--requests", "4", "--input-len", "8", "--output-len", "5"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--url", "http://x", *BASE],
            "error: one of the arguments --concurrency --request-rate is required",
        ),
        (
            ["--url", "http://x", "--concurrency", "2", "--request-rate", "1", *BASE],
            "error: argument --request-rate: not allowed with argument --concurrency",
        ),
        (
            ["--url", "http://x", "--concurrency", "0", *BASE],
            "error: argument --concurrency: must be >= 1, got 0",
        ),
        (
            ["--url", "http://x", "--concurrency", "2", *BASE, "--range-ratio", "2"],
            "error: argument --range-ratio: invalid value: '2' (expected a number between 0 and 1)",
        ),
        (
            ["--url", "http://x", "--concurrency", "2", *BASE, "--dataset", "foo"],
            "error: argument --dataset: invalid value: 'foo' (use random-ids, sharegpt:PATH, jsonl:PATH, "
            "mooncake:PATH, burstgpt:PATH, multiturn[:KEY=VALUE,...], image[:KEY=VALUE,...] or mmmu:PATH)",
        ),
        (
            ["--url", "http://x", "--concurrency", "2", *BASE, "--api", "grpc"],
            "error: argument --api: invalid choice: 'grpc' (choose from ",
        ),
        (
            ["--url", "http://x", "--concurrency", "2", *BASE, "--processes", "3"],
            "error: LoadSpec.processes=3: is larger than concurrency=2. "
            "Fix: use at most one process per concurrent request",
        ),
    ],
)
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m pytest_sglang load")
    # argparse's quoting of choices differs between Python versions: compare the stable prefix.
    assert err.strip().splitlines()[-1].startswith(f"python -m pytest_sglang load: {message}")


def test_summary_table_and_json(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.jsonl"
    code = main(
        ["--url", fake_server.url, "--concurrency", "2", *BASE, "--json", str(out), "--api-key", "sk-abcdef"]
    )
    assert code == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == "=" * 12 + " Serving Benchmark Result " + "=" * 12
    assert "Successful requests:                     4         " in lines
    assert "Total generated tokens:                  20        " in lines
    for heading in (
        "Request throughput (req/s):",
        "Output token throughput (tok/s):",
        "Concurrency:",
        "Median TTFT (ms):",
        "P99 ITL (ms):",
        "Mean TPOT (ms):",
        "Max ITL (ms):",
        "Peak output token throughput (tok/s):",
    ):
        assert any(line.startswith(heading) for line in lines), heading
    data = json.loads(out.read_text())
    for key in (
        "completed",
        "failed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "input_throughput",
        "output_throughput",
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
        "median_itl_ms",
        "p99_itl_ms",
        "median_tpot_ms",
        "median_e2e_latency_ms",
        "concurrency",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "std_e2e_latency_ms",
    ):
        assert key in data, key
    assert data["completed"] == 4 and data["backend"] == "sglang" and data["max_concurrency"] == 2
    assert "sk-abcdef" not in out.read_text()


def test_failed_requests_exit_1_and_are_listed(
    fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_server.behaviour.drop_after = 2
    assert main(["--url", fake_server.url, "--concurrency", "2", *BASE, "--warmup", "0"]) == 1
    text = capsys.readouterr().out
    assert "Failed requests:                         4         " in text
    assert "  truncated:                             4         " in text
    assert "failed: request 0: truncated: " in text


def test_unreachable_url_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["--url", f"http://127.0.0.1:{port}", "--concurrency", "1", *BASE]) == 3
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: cannot reach the SGLang server at http://127.0.0.1:{port}: connection refused"
    )


def test_dispatched_by_package_main() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_sglang", "load", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: python -m pytest_sglang load")
    assert "--request-rate R" in proc.stdout


def test_load_timeout_stops_a_stalled_load(fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.behaviour.stall_after = 1
    code = main(["--url", fake_server.url, "--concurrency", "2", *BASE, "--warmup", "0", "--load-timeout", "0.5",
                 "--timeout", "30"])  # --timeout: the old name of --request-timeout
    assert code == 1
    text = capsys.readouterr().out
    assert "  timeout:                               2         " in text
    assert "Requests not sent:                       2         " in text
    assert "stopped early: the load's deadline load_timeout_s=0.5 s passed: 2 requests sent, 2 not sent" in text


def test_ctrl_c_exits_130_with_a_word(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("pytest_sglang.cli.load.run_load", interrupted)
    assert main(["--url", "http://127.0.0.1:9", "--concurrency", "1", *BASE]) == 130
    assert capsys.readouterr().err.strip() == "interrupted: the load was stopped and every request in flight cancelled"


# ---- the same environment, values, files and Ctrl-C as the plugin (tests/cli/test_common.py) ----
def _load_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("SGLANG_API_KEY")}
    return subprocess.run([sys.executable, "-m", "pytest_sglang", "load", *args], capture_output=True, text=True,
                          timeout=120, env={**clean, **(env or {})})


def test_url_json_and_dataset_are_checked_before_anything_is_sent(tmp_path: Path) -> None:
    shape = ["--concurrency", "1", *BASE]
    scheme = _load_cli("--url", "127.0.0.1:30000", *shape)
    # Before: a raw NonHttpUrlClientError traceback.
    assert scheme.returncode == 2 and "Traceback" not in scheme.stderr
    assert scheme.stderr.strip().endswith("error: --url='127.0.0.1:30000': the URL has no scheme://. "
                                          "Fix: write http://127.0.0.1:30000 (or https:// for a TLS endpoint)")
    (tmp_path / "file").write_text("")
    out = _load_cli("--url", "http://127.0.0.1:9", *shape, "--json", str(tmp_path / "file" / "r.jsonl"))
    assert out.returncode == 2 and "--json=" in out.stderr and "is a file, not a directory" in out.stderr
    big = tmp_path / "share.json"
    with big.open("wb") as fh:
        fh.truncate(65 * 2**20)
    data = _load_cli("--url", "http://127.0.0.1:9", *shape, "--dataset", f"sharegpt:{big}")
    assert data.returncode == 2
    assert f"dataset='{big}': is 65.0 MiB, larger than the 64.0 MiB cap of a file read whole. Fix: keep the " \
        "prompts the load uses" in data.stderr


def test_the_key_comes_from_sglang_api_key_and_a_401_names_its_source(sim_factory: SimFactory) -> None:
    url = sim_factory("--api-key", "sk-load").url
    shape = ["--url", url, "--concurrency", "1", *BASE]
    denied = _load_cli(*shape, env={"SGLANG_API_KEY": "sk-nope"})
    assert denied.returncode == 2, denied.stderr
    assert "answered 401: the server refused the key from env SGLANG_API_KEY" in denied.stderr
    assert "sk-nope" not in denied.stderr
    ok = _load_cli(*shape, env={"SGLANG_API_KEY": "sk-load"})
    assert ok.returncode == 0, ok.stderr
    assert "Successful requests:                     4" in ok.stdout
