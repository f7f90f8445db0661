"""``python -m pytest_sglang plan``: output, exit status (0 fits, 1 does not, 2 bad input), messages."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_sglang.cli.plan import main

SEED = ["--tp-size", "8", "--enable-hierarchical-cache"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_seed_refused_launch_prints_the_arithmetic_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--host-memory-gb", "418", "--gpus", "8", "--", *SEED, "--hicache-size", "300")
    assert code == 1
    assert "ranks per node:        8 (tp 8 x pp 1 x dp 1 / nnodes 1)" in out
    assert "host pool per rank:    300.0 GB (--hicache-size 300, decimal GB per rank)" in out
    assert "host pools in total:   2,400.0 GB (8 ranks)" in out
    assert "host memory available: 418.0 GB (--host-memory-gb)" in out
    assert "reserve:               10.0 GB, leaving 408.0 GB for host pools" in out
    assert ("verdict:               DOES NOT FIT: --hicache-size 300 is GB per TP rank: 300 GB x 8 ranks = "
            "2400 GB, but only 408 GB are available (reserve 10 GB)") in out
    assert "fix:                   --hicache-size 50 or less (GB per rank)" in out


def test_seed_48gb_fits_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--host-memory-gb", "418", "--", *SEED, "--hicache-size", "48")
    assert code == 0
    assert "FITS: --hicache-size 48 is GB per TP rank: 48 GB x 8 ranks = 384 GB" in out


def test_simulator_profile_gives_host_and_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--", *SEED, "--hicache-size", "48", "--mem-fraction-static", "0.93",
                       "--sim-profile", "kimi-k2.5-rtx6000x8")
    assert code == 0
    assert "(simulated host of profile kimi-k2.5-rtx6000x8)" in out
    assert "KV capacity estimate:" in out and "[--mem-fraction-static]" in out
    assert "max_total_num_tokens:  ~231," in out
    assert "requests of 4,000 tokens at once" in out


def test_explicit_hardware_flags_estimate_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--host-memory-gb", "418", "--kv-bytes-per-token", "70272",
                       "--gpu-memory-gb", "96GiB", "--weights-gb-per-rank", "79.63",
                       "--avg-request-tokens", "4000",
                       "--", *SEED, "--hicache-size", "48", "--mem-fraction-static", "0.93")
    assert code == 0
    assert "max_total_num_tokens:  ~231,011 per DP rank (the given flags)" in out
    assert "~57 requests of 4,000 tokens at once (231,011 // 4,000)" in out


def test_too_few_gpus_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--host-memory-gb", "418", "--gpus", "4", "--", *SEED, "--hicache-size", "48")
    assert code == 1
    assert "the launch needs 8 GPUs per node (tp x pp x dp / nnodes) but this node has 4" in out


def test_unknown_size_exits_2_and_names_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--host-memory-gb", "418", "--", *SEED, "--hicache-ratio", "2")
    assert code == 2
    assert "give --kv-bytes-per-token and --gpu-memory-gb" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--host-memory-gb", "-5", "--", "--tp-size", "8"],
     "argument --host-memory-gb: '-5' is negative: sizes must be >= 0"),
    (["--host-memory-gb", "400XB", "--", "--tp-size", "8"],
     "argument --host-memory-gb: unknown unit 'XB' in '400XB' (use GB, GiB, TB, TiB, MB, MiB; "
     "a bare number is decimal GB)"),
    (["--kv-bytes-per-token", "7e", "--", "--tp-size", "8"],
     "argument --kv-bytes-per-token: unknown unit 'e' in '7e' (use B, KB, KiB, MB, MiB; "
     "a bare number is bytes)"),
    (["--gpu-memory-gb", "lots", "--", "--tp-size", "8"],
     "argument --gpu-memory-gb: invalid size 'lots' (examples: 449, 449GB, 418GiB)"),
    (["--gpus", "0", "--", "--tp-size", "8"], "argument --gpus: '0' must be >= 1"),
    (["--host-memory-gb", "400"], "give the SGLang launch args after --"),
    (["--", "--tp-size", "abc"], "plan launch args='--tp-size abc': SGLang would reject these launch args"),
    (["--", "--pp", "2"], "ambiguous option: --pp"),
    (["--", "--tp-size", "8", "--sim-profile", "nope"],
     "plan launch args='--tp-size 8 --sim-profile nope': the simulator would reject these launch args "
     "(argument --sim-profile: invalid choice: 'nope' (choose from"),
    (["--", "--sim-prof", "tiny", "--sim-gpu-memory-gb", "lots"],  # the simulator's own abbreviations
     "(argument --sim-gpu-memory-gb: invalid number: 'lots')"),
])
def test_bad_input_exits_2_with_the_flag_value_and_fix(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                        message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err


def test_units_gib_and_tb(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--host-memory-gb", "1TB", "--reserve-gb", "10GiB", "--", "--tp-size", "1")
    assert "host memory available: 1,000.0 GB" in out
    assert "reserve:               10.7 GB" in out


def test_secrets_in_launch_args_are_not_printed(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, err = run(capsys, "--host-memory-gb", "418", "--", "--tp-size", "8",
                      "--api-key", "sk-planner-secret")
    assert "sk-planner-secret" not in out + err
    assert "--api-key ***" in out


def test_dispatched_by_python_dash_m() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_sglang", "plan", "--host-memory-gb", "418", "--",
                           *SEED, "--hicache-size", "300"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "DOES NOT FIT" in proc.stdout


def test_a_misspelt_flag_is_refused_naming_the_flag_meant(capsys: pytest.CaptureFixture[str]) -> None:
    # Before: --tp-szie was kept as a flag that is not SGLang's, and the plan was made for 1 GPU.
    code, out, err = run(capsys, "--host-memory-gb", "418", "--gpus", "8", "--", "--tp-szie", "8",
                         "--enable-hierarchical-cache", "--hicache-size", "48")
    assert code == 2
    assert not out
    assert "--tp-szie is not a known flag, did you mean --tp-size?" in err


def test_a_flag_of_a_newer_sglang_is_a_warning_naming_the_recorded_version(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--host-memory-gb", "418", "--", *SEED, "--hicache-size", "48",
                         "--enable-brand-new-thing")
    assert code == 0
    assert "warning: --enable-brand-new-thing is not a flag of SGLang 0.5.23 (the recorded table)" in err
    assert "FITS" in out


def test_abbreviations_sglang_accepts_are_not_typos(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--host-memory-gb", "418", "--", "--tp", "8", "--enable-hierarchical-cache",
                         "--hicache-size", "48")
    assert code == 0, err
    assert "warning" not in err
