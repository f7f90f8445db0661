"""The launches a limit needs, the three verdicts and the spread of a baseline's launches (pure functions)."""

from __future__ import annotations

import math

import pytest

from pytest_sglang.loadgen.measure import launch_noise
from pytest_sglang.loadgen.measure.intervals import unreliable_note
from pytest_sglang.loadgen.measure.launch_noise import (
    CANNOT_JUDGE,
    PASSED,
    REGRESSED,
    LaunchSpread,
    cannot_judge_launches,
    count_needed,
    judgeable,
    launches_needed,
    needed_for,
    one_launch_note,
    t_quantile,
    two_sided,
    verdict,
)


def test_the_power_calculation_gives_the_textbook_minimum() -> None:
    # The figure: a 10 % change at 3 % launch-to-launch CV, one-sided 1 %, power 0.95: about 3 a side.
    assert launches_needed(10, 3) == 3
    assert launches_needed(10, 3, alpha=0.01, power=0.95) == 3
    # n = 2 ((2.326 + 1.645) cv / effect)^2: twice the noise, four times the launches.
    assert launches_needed(10, 6) == math.ceil(2 * (3.9712 * 0.6) ** 2)
    assert launches_needed(5, 14.9) > 50  # the fleet of docs/fleet.md: no practical count judges 5 %
    assert launches_needed(10, 0) == 1
    # A CV measured from few launches (t quantiles) needs more than the normal approximation says.
    assert launches_needed(10, 3, df=2) > launches_needed(10, 3)
    assert launches_needed(10, 3, alpha=0.05, power=0.8) < launches_needed(10, 3)


@pytest.mark.parametrize(("effect", "cv", "alpha", "power"), [
    (0, 3, 0.01, 0.95), (-5, 3, 0.01, 0.95), (math.nan, 3, 0.01, 0.95), (10, -1, 0.01, 0.95),
    (10, math.inf, 0.01, 0.95), (10, 3, 0.0, 0.95), (10, 3, 0.01, 1.0), (10, 3, 0.6, 0.95),
])
def test_the_power_calculation_refuses_what_is_not_a_question(effect: float, cv: float, alpha: float,
                                                              power: float) -> None:
    with pytest.raises(ValueError, match=r"effect|coefficient|alpha"):
        launches_needed(effect, cv, alpha=alpha, power=power)


def test_quantiles_are_normal_without_degrees_of_freedom_and_wider_with_few() -> None:
    assert math.isclose(t_quantile(0.975), 1.959964, rel_tol=1e-5)
    assert math.isclose(t_quantile(0.975, 2), 4.302653, rel_tol=1e-5)  # tables: t(0.975, 2) = 4.303
    assert math.isclose(t_quantile(0.99, 4), 3.746947, rel_tol=1e-5)
    assert math.isclose(two_sided(0.95, 10), 2.228139, rel_tol=1e-5)
    for bad in (0.5, 1.0, 0.2):
        with pytest.raises(ValueError, match="quantile"):
            t_quantile(bad)
    with pytest.raises(ValueError, match="confidence"):
        two_sided(1.5)


def test_count_needed_scales_the_half_width_as_one_over_the_square_root() -> None:
    assert count_needed(64, 10.0, 5.0) == 256 and count_needed(3, 10.0, 5.0) == 12
    assert count_needed(64, 4.0, 5.0) == 64  # within the limit: what was given is enough
    assert count_needed(0, 10.0, 5.0) == 4  # nothing given counts as one
    assert judgeable(3, 3) and not judgeable(4, 3)


def test_three_verdicts_one_rule() -> None:
    assert verdict(True, needed=9, given=1) == REGRESSED  # detected beyond the noise: a regression whatever the counts
    assert verdict(False, needed=3, given=3) == PASSED
    assert verdict(False, needed=4, given=3) == CANNOT_JUDGE
    assert launch_noise.VERDICTS == (PASSED, REGRESSED, CANNOT_JUDGE) == ("passed", "regressed", "cannot judge")


def test_the_within_launch_note_is_the_same_rule() -> None:
    # unreliable_note (loadgen.intervals) says "cannot judge" exactly when count_needed exceeds what was given.
    assert unreliable_note("output_throughput", 64, noise_pct=10.0, limit_pct=5.0, repeats=3) == (
        launch_noise.cannot_judge_within("output_throughput", 5.0, 10.0, 64, 3))
    assert unreliable_note("output_throughput", 64, noise_pct=5.0, limit_pct=5.0) is None
    assert unreliable_note("output_throughput", 64, noise_pct=9.0, limit_pct=0.0) is None


def test_a_spread_of_launches() -> None:
    one = LaunchSpread((100.0,))
    assert one.log_var is None and one.cv_pct is None and one.df is None and one.prediction_var() is None
    assert needed_for(one, 5.0) is None
    three = LaunchSpread((97.0, 100.0, 103.0))
    assert three.launches == 3 and three.df == 2
    assert math.isclose(three.center, (97 * 100 * 103) ** (1 / 3))
    assert three.cv_pct is not None and 2.9 < three.cv_pct < 3.1
    assert math.isclose(three.range_pct, (103 / 97 - 1) * 100)
    var = three.log_var
    assert var is not None and math.isclose(three.prediction_var() or 0, var * 4 / 3)
    assert needed_for(three, 10.0) == 3 and needed_for(three, 5.0) == launches_needed(5.0, three.cv_pct)


def test_the_lines_give_the_figures_and_the_fix() -> None:
    spread = LaunchSpread((100.0, 114.9, 105.0))
    line = cannot_judge_launches("output_throughput", 5.0, spread, 40)
    assert line.startswith("cannot judge a 5 % change of output_throughput: healthy launches differ by 14.9 %")
    assert "about 40 launches per side would (power 0.95, one-sided 1%)" in line and "--sglang-report" in line
    note = one_launch_note("base.json")
    assert note.startswith("baseline of 1 launch: base.json cannot know the noise between launches")
    assert "record 2 more with --sglang-report" in note
