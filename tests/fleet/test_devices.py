"""GPU blocks per worker and the refusal before anything starts (pytest_sglang/fleet/devices.py)."""

from __future__ import annotations

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.fleet.devices import device_blocks, device_blocks_for, gpus_per_worker
from pytest_sglang.sglang.args import LaunchArgs, parse_launch_args

NO_SMI: dict[str, str] = {}


def _args(*flags: str) -> LaunchArgs:
    return parse_launch_args(["--model-path", "m", *flags])


@pytest.mark.parametrize(("flags", "per"), [
    ((), 1), (("--tp-size", "2"), 2), (("--tp-size", "2", "--pp-size", "2"), 4),
    (("--tp-size", "2", "--dp-size", "2"), 4), (("--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"), 2),
])
def test_gpus_per_worker(flags: tuple[str, ...], per: int) -> None:
    assert gpus_per_worker(_args(*flags)) == per


def test_worker_i_gets_the_ith_block() -> None:
    args = _args("--tp-size", "2")
    assert device_blocks(args, 3, "6", NO_SMI) == [("0", "1"), ("2", "3"), ("4", "5")]
    assert device_blocks(args, 2, "4,5,6,7", NO_SMI) == [("4", "5"), ("6", "7")]
    # "all" reads CUDA_VISIBLE_DEVICES first
    assert device_blocks(args, 2, "all", {"CUDA_VISIBLE_DEVICES": "3, 2,1,0"}) == [
        ("3", "2"), ("1", "0")]


def test_cpu_workers_get_no_block() -> None:
    assert device_blocks(_args("--device", "cpu"), 4, "none", NO_SMI) is None
    mixed = device_blocks_for([_args("--device", "cpu"), _args("--tp-size", "2")], "2", NO_SMI)
    assert mixed == [None, ("0", "1")]


def test_unknown_pool_numbers_blocks_from_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: the pool is unknown, nothing is refused
    assert device_blocks(_args("--tp-size", "2"), 2, "all", {}) == [("0", "1"), ("2", "3")]


def test_too_few_gpus_is_refused_with_the_arithmetic() -> None:
    with pytest.raises(ConfigError) as err:
        device_blocks(_args("--tp-size", "2"), 3, "0,1,2,3", NO_SMI)
    text = str(err.value)
    assert "--sglang-workers" in text
    assert "3 workers x 2 GPU(s) each (tp 2 x pp 1) = 6 GPUs, but --sglang-gpus 0,1,2,3 allows 4 (0,1,2,3); " \
           "nothing was started" in text
    assert "--sglang-gpus" in text.split("nothing was started", 1)[1]  # the remedy names the option


def test_refusal_shows_dp_and_none() -> None:
    with pytest.raises(ConfigError, match=r"2 workers x 4 GPU\(s\) each \(tp 2 x pp 1 x dp 2\) = 8 GPUs, but "
                                          r"--sglang-gpus none allows 0 \(no GPU\)"):
        device_blocks(_args("--tp-size", "2", "--dp-size", "2"), 2, "none", NO_SMI)


def test_refusal_of_workers_of_different_sizes() -> None:
    workers = [_args("--tp-size", "2"), _args("--tp-size", "4")]
    with pytest.raises(ConfigError, match=r"2 workers needing 2 \+ 4 GPUs = 6 GPUs, but --sglang-gpus 4 allows 4"):
        device_blocks_for(workers, "4", NO_SMI)
