"""The simulator's command line rejects exactly what SGLang 0.5.23's does (exit 2, argparse's message).

tests/real/test_simulator_cli_parity.py checks the same messages against real SGLang.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_sglang.sglang.flags import Flag, flags
from pytest_sglang.simulator.launch.cli import parse

MODEL = ("--model-path", "sim/tiny-llama")


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        parse(list(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m pytest_sglang.simulator "), err[:200]
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((*MODEL, "--bogus-flag", "x"), "error: unrecognized arguments: --bogus-flag x"),
        (("--sim-profile", "tiny"), "error: the following arguments are required: --model-path/--model"),
        # SGLang's parse_args reports the missing required argument first.
        (("--bogus-flag",), "error: the following arguments are required: --model-path/--model"),
        ((*MODEL, "--tp", "abc"), "error: argument --tp-size/--tensor-parallel-size: invalid int value: 'abc'"),
        ((*MODEL, "--attention-backend", "bogus"), "error: argument --attention-backend: invalid choice: 'bogus'"),
        ((*MODEL, "--cuda-graph-max-bs-decode", "1.5"), "error: argument --cuda-graph-max-bs-decode: invalid int "
                                                          "value: '1.5'"),
        ((*MODEL, "--schedule-conservativeness", "x"), "error: argument --schedule-conservativeness: invalid float "
                                                        "value: 'x'"),
        ((*MODEL, "--preferred-sampling-params", "{x"), "error: argument --preferred-sampling-params: invalid "
                                                         "loads value: '{x'"),
        # Abbreviations resolve as in SGLang: a prefix of two flags is ambiguous.
        ((*MODEL, "--cuda-graph-max-bs", "8"), "error: ambiguous option: --cuda-graph-max-bs could match "
                                               "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
        ((*MODEL, "--cuda-graph-bs-decode"), "error: argument --cuda-graph-bs-decode: expected at least one "
                                             "argument"),
        # A field of ServerArgs that 0.5.23 does not offer as a flag.
        ((*MODEL, "--watermark-key", "k"), "error: unrecognized arguments: --watermark-key k"),
    ],
)
def test_what_sglang_rejects_exits_2_with_argparse_message(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    assert message in _error(capsys, *argv)


def test_simulator_flags_aliases_and_list_values_are_accepted() -> None:
    args, sim = parse(["--model", "m", "--tp", "2", "--sim-time-scale", "0.5", "--cuda-graph-bs-decode", "1", "2",
                       "4", "--no-enable-tf32-matmul", "--ep", "2", "--lora-paths", "a", "b"])
    assert (args.model_path, args.tp_size, sim.time_scale) == ("m", 2, 0.5)
    assert args.passthrough["cuda_graph_bs_decode"] == (1, 2, 4)
    assert args.passthrough["enable_tf32_matmul"] is False and args.passthrough["ep_size"] == 2
    assert args.passthrough["lora_paths"] == ("a", "b") and args.unknown == ()


def _valid(flag: Flag) -> list[str]:
    if flag.arity == "bool":
        return [flag.options[0], f"--no-{flag.options[0].removeprefix('--')}"]
    if flag.arity in ("0", "?", "*"):
        return [flag.options[-1]]
    value = flag.choices[0] if flag.choices else {"json": "{}", "human_readable_int": "1k"}.get(flag.value_type, "1")
    return [flag.options[-1], value]


def test_every_sglang_flag_and_alias_is_accepted() -> None:
    """The modelled flags and the table together cover 0.5.23's parser: nothing real is rejected."""
    for flag in flags():
        parse([*MODEL, *_valid(flag)])


def test_a_bogus_flag_stops_the_process_before_it_listens() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_sglang.simulator", *MODEL, "--bogus-flag"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "python -m pytest_sglang.simulator: error: unrecognized arguments: --bogus-flag")
    assert "Uvicorn running" not in proc.stdout + proc.stderr
