"""``--sim-launch-jitter CV`` / ``--sim-launch-seed N``: one speed draw per launch, as real GPUs differ by boot."""

from __future__ import annotations

import re
import statistics

import pytest

from pytest_sglang.simulator.config import resolve
from pytest_sglang.simulator.failures.faults import parse_faults
from pytest_sglang.simulator.launch import cli
from pytest_sglang.simulator.launch.jitter import jittered, launch_factor
from pytest_sglang.simulator.logs import Logger
from pytest_sglang.simulator.scheduling.profiles import get_profile
from pytest_sglang.simulator.server import _speed
from tests.conftest import SimFactory

MODEL = ("--model-path", "sim/tiny-llama")
_FACTOR = re.compile(r"this launch's speed factor is (\d+\.\d+)")


def test_off_by_default_the_speed_is_the_profile_s() -> None:
    _, sim = cli.parse([*MODEL])
    assert sim.launch_jitter == 0.0 and sim.launch_seed is None
    assert launch_factor(0.0, None) == 1.0


def test_the_same_seed_gives_the_same_factor_and_no_seed_a_fresh_one() -> None:
    assert launch_factor(0.03, 7) == launch_factor(0.03, 7) != launch_factor(0.03, 8)
    assert len({launch_factor(0.03, None) for _ in range(5)}) == 5


def test_the_draws_have_mean_1_and_the_cv_asked_for() -> None:
    draws = [launch_factor(0.03, seed) for seed in range(4000)]
    mean = statistics.fmean(draws)
    assert abs(mean - 1) < 0.003
    assert 0.027 < statistics.stdev(draws) / mean < 0.033


def test_the_factor_scales_every_prefill_and_decode_time(capsys: pytest.CaptureFixture[str]) -> None:
    args, sim = cli.parse([*MODEL, "--sim-launch-jitter", "0.2", "--sim-launch-seed", "3"])
    cfg = resolve(args, sim, get_profile(sim.profile), parse_faults(sim.faults))
    factor = launch_factor(0.2, 3)
    base = get_profile("tiny").speed
    assert _speed(cfg, Logger("info")) == jittered(base, factor)
    speed = jittered(base, factor)
    assert speed.decode_step_s(8) == pytest.approx(base.decode_step_s(8) * factor)
    assert speed.prefill_s(1000) == pytest.approx(base.prefill_s(1000) * factor)
    assert f"speed factor is {factor:.4f}" in capsys.readouterr().err


def test_each_launch_says_its_draw_in_the_log(sim_factory: SimFactory) -> None:
    seeded = [sim_factory("--sim-launch-jitter", "0.03", "--sim-launch-seed", "11") for _ in range(2)]
    fresh = [sim_factory("--sim-launch-jitter", "0.03") for _ in range(2)]
    found = [_FACTOR.findall(s.log_text()) for s in (*seeded, *fresh)]
    assert all(len(f) == 1 for f in found), found
    assert found[0] == found[1] == [f"{launch_factor(0.03, 11):.4f}"]
    assert found[2] != found[3]  # unseeded: each launch its own draw
    assert "seed 11" in seeded[0].log_text() and "unseeded: a fresh draw" in fresh[0].log_text()
    assert "speed factor" not in sim_factory().log_text()  # off by default: nothing drawn, nothing said


@pytest.mark.parametrize(("argv", "message"), [
    (("--sim-launch-jitter", "-0.1"), "argument --sim-launch-jitter: '-0.1' is outside 0 to 0.5"),
    (("--sim-launch-jitter", "0.9"), "argument --sim-launch-jitter: '0.9' is outside 0 to 0.5"),
    (("--sim-launch-jitter", "nan"), "argument --sim-launch-jitter: 'nan' is outside 0 to 0.5"),
    (("--sim-launch-jitter", "3%"), "argument --sim-launch-jitter: not a number: '3%'; give a coefficient of "
                                    "variation such as 0.03"),
    (("--sim-launch-seed", "-1"), "argument --sim-launch-seed: '-1' is negative; give a seed >= 0"),
    (("--sim-launch-seed", "x"), "argument --sim-launch-seed: not an integer: 'x'"),
])
def test_bad_values_exit_2_naming_the_flag(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                           message: str) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse([*MODEL, *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
