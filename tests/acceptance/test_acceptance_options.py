"""The ``--sglang-acceptance-*`` settings reach the shipped suite's checks; bad values are usage errors."""

from __future__ import annotations

import pytest

from pytest_sglang.acceptance.support import SETTING_OF_FIELD, acceptance_settings
from pytest_sglang.correctness import AcceptanceSettings
from pytest_sglang.plugin import settings
from tests.conftest import SimFactory

SUITE = ("--pyargs", "pytest_sglang.acceptance", "-p", "no:cacheprovider")
SHAPE = ("-k", "response_shape and batch")


@pytest.fixture(autouse=True)
def _clean_sglang_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for option in settings.OPTIONS:
        monkeypatch.delenv(option.env, raising=False)


def test_every_field_comes_from_its_option() -> None:
    resolved = settings.resolve({}, {
        "sglang_acceptance_samples": "3", "sglang_acceptance_max_tokens": "5",
        "sglang_acceptance_request_timeout": "7.5", "sglang_acceptance_min_match_rate": "0.5",
        "sglang_acceptance_max_kl": "0.004", "sglang_acceptance_concurrency": "2",
        "sglang_acceptance_disconnect_timeout": "9"}, environ={})
    assert acceptance_settings(resolved) == AcceptanceSettings(
        samples=3, max_tokens=5, request_timeout_s=7.5, min_match_rate=0.5, max_kl=0.004, concurrency=2,
        disconnect_timeout_s=9.0)
    assert acceptance_settings(settings.resolve({}, {}, environ={})) == AcceptanceSettings()  # the same defaults


def test_one_mapping_covers_every_field_and_every_acceptance_option() -> None:
    """Issue 31: the settings -> engine mapping is one table; a new field or option without a row fails here."""
    assert sorted(SETTING_OF_FIELD) == sorted(AcceptanceSettings.field_names())
    options = sorted(o.name for o in settings.OPTIONS if o.name.startswith("sglang_acceptance_"))
    assert sorted(SETTING_OF_FIELD.values()) == options


def test_cli_env_and_ini_values_reach_the_checks(pytester: pytest.Pytester, sim_factory: SimFactory,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    sim = sim_factory("--sim-fault", "empty-finish-reason")  # fails the shape check, which shows its figures
    pytester.makeini("[pytest]\nsglang_acceptance_samples = 3\nsglang_acceptance_max_tokens = 4\n")
    from_ini = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", *SHAPE)
    from_ini.assert_outcomes(failed=2)
    from_ini.stdout.fnmatch_lines(["*measured: requests=3*"])
    monkeypatch.setenv("PYTEST_SGLANG_ACCEPTANCE_SAMPLES", "2")  # env beats ini
    from_env = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", *SHAPE)
    from_env.stdout.fnmatch_lines(["*measured: requests=2*"])
    from_cli = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", *SHAPE,
                                             "--sglang-acceptance-samples=1")  # the command line beats both
    from_cli.stdout.fnmatch_lines(["*measured: requests=1*"])
    assert "requests=2" not in from_cli.stdout.str()


@pytest.mark.parametrize(("where", "value", "says"), [
    ("cli", ("--sglang-acceptance-samples", "0"), "--sglang-acceptance-samples='0': must be a whole number >= 1. "
                                                   "Fix: give --sglang-acceptance-samples a valid value *"),
    ("ini", "sglang_acceptance_max_kl = abc", "ini option sglang_acceptance_max_kl='abc': expected a number, "
                                              "e.g. 900 or 2.5. Fix: give --sglang-acceptance-max-kl a valid value*"),
    ("ini", "sglang_acceptance_min_match_rate = 80", "ini option sglang_acceptance_min_match_rate='80': must be a "
                                                     "fraction between 0 and 1, e.g. 0.95*"),
    ("env", ("PYTEST_SGLANG_ACCEPTANCE_REQUEST_TIMEOUT", "-5"), "env PYTEST_SGLANG_ACCEPTANCE_REQUEST_TIMEOUT='-5': "
                                                                "must be a number greater than 0*"),
], ids=["cli-samples-0", "ini-max-kl-abc", "ini-min-match-80", "env-timeout-negative"])
def test_bad_values_are_usage_errors_naming_option_value_and_fix(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str, value: str | tuple[str, str],
        says: str) -> None:
    args: list[str] = []
    if where == "cli":
        args += list(value)
    elif where == "ini":
        pytester.makeini(f"[pytest]\n{value}\n")
    else:
        monkeypatch.setenv(*value)
    # No server is configured: the usage error comes first, before anything would start.
    result = pytester.runpytest_subprocess(*SUITE, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: " + says])
