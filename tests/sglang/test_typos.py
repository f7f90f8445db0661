"""Launch args checked against SGLang 0.5.23's recorded flags: typos refused, newer flags reported."""

from __future__ import annotations

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang.args import check_launch_flags, parse_launch_args
from pytest_sglang.sglang.typos import Typo, check_flags, close_flags

KNOWN = ("--tp-size", "--pp-size", "--enable-metrics", "--enable-mfu-metrics", "--host", "--port")


@pytest.mark.parametrize(("typo", "meant"), [("--tp-szie", "--tp-size"), ("--enable-metrcs", "--enable-metrics"),
                                             ("--enable-metric", "--enable-metrics"), ("--hots", "--host")])
def test_one_or_two_keystrokes_from_a_known_flag_is_a_typo(typo: str, meant: str) -> None:
    assert close_flags(typo, KNOWN)[0] == meant


@pytest.mark.parametrize("new", ["--enable-new-thing", "--cp-degree", "--enable-flops-metrics"])
def test_a_flag_far_from_every_known_one_is_not_a_typo(new: str) -> None:
    assert close_flags(new, KNOWN) == ()
    assert check_flags([new, "3"], KNOWN)[0].flag == new


def test_check_flags_raises_for_typos_and_skips_values() -> None:
    with pytest.raises(Typo, match="--tp-szie is not a known flag, did you mean --tp-size"):
        check_flags(["--tp-szie", "8", "--newer=1"], KNOWN)
    assert [f.flag for f in check_flags(["--newer=1", "value"], KNOWN)] == ["--newer"]


def test_a_launch_typo_is_a_config_error_naming_the_flag_and_masking_keys() -> None:
    args = parse_launch_args(["--model-path", "m", "--tp-szie", "2", "--api-ke", "SECRET-KEY-1"])
    with pytest.raises(ConfigError) as info:
        check_launch_flags(args)
    text = str(info.value)
    assert "--tp-szie is not a known flag, did you mean --tp-size?" in text
    assert "SGLang 0.5.23" in text
    assert "SECRET-KEY-1" not in text and "--api-ke ***" in text


def test_a_newer_flag_is_kept_and_reported_with_the_recorded_version() -> None:
    args = parse_launch_args(["--model-path", "m", "--enable-brand-new-thing"])
    assert args.unknown == ("--enable-brand-new-thing",)
    assert check_launch_flags(args) == ["--enable-brand-new-thing is not a flag of SGLang 0.5.23 (the recorded "
                                        "table): passed on unchanged, for a newer SGLang that has it"]


def test_abbreviations_are_valid_and_other_programs_flags_can_be_known() -> None:
    assert check_launch_flags(parse_launch_args(["--tp", "2", "--mem-frac", "0.8"])) == []
    args = parse_launch_args(["--sim-profile", "tiny"])
    assert check_launch_flags(args, also_known=frozenset({"--sim-profile"})) == []
    with pytest.raises(ConfigError, match="did you mean --sim-profile"):
        check_launch_flags(parse_launch_args(["--sim-profle", "tiny"]), also_known=frozenset({"--sim-profile"}))
