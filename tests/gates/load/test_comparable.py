"""Two servers compared with each other (a speedup, a parity, an A/B) are checked comparable first."""

from __future__ import annotations

from pytest_sglang.gates.correctness.consistency import FIELDS as WORKER_FIELDS
from pytest_sglang.gates.keywords import Fraction
from pytest_sglang.gates.load.comparable import FIELDS, MODEL_FIELDS, comparable, differences

INFO = {"version": "0.5.23", "model_path": "Qwen/Qwen3-8B", "dtype": "bfloat16", "quantization": None, "tp_size": 2,
        "pp_size": 1, "dp_size": 1, "ep_size": 1, "speculative_algorithm": "EAGLE3"}


def test_the_same_setup_is_comparable_whatever_the_comparison_varies() -> None:
    check = comparable("g", INFO, {**INFO, "speculative_algorithm": None}, here="this server", there="the reference")
    assert check.passed and check.measured == "none"


def test_each_differing_field_is_named_with_both_values() -> None:
    other = {**INFO, "model_path": "Qwen/Qwen3-0.6B", "tp_size": 1, "quantization": "fp8"}
    check = comparable("g", INFO, other, here="this server", there="the reference", remedy="or else")
    assert not check.passed
    assert check.measured == ("model_path: Qwen/Qwen3-8B on this server, Qwen/Qwen3-0.6B on the reference; "
                              "quantization: null on this server, fp8 on the reference; tp_size: 2 on this server, "
                              "1 on the reference")
    assert check.remedy == ("launch the reference with the same SGLang version, model and model_path, quantization, "
                            "tp_size as this server; or else")


def test_an_absent_field_counts_as_null_and_the_model_fields_leave_the_layout_out() -> None:
    assert differences(INFO, {k: v for k, v in INFO.items() if k != "version"}) == [("version", "0.5.23", "null")]
    assert differences(INFO, {**INFO, "tp_size": 4}, MODEL_FIELDS) == []
    assert set(FIELDS) <= set(WORKER_FIELDS), "a fleet's workers are compared on at least these fields"


def test_a_rate_above_1_is_read_as_a_percent_only_where_that_makes_sense() -> None:
    rate = Fraction()
    assert rate.suggest(5) == "0.05" and rate.suggest("1.5%") == "0.015" and rate.suggest(95.0) == "0.95"
    assert rate.suggest(1.5) is None and rate.suggest(250) is None and rate.suggest(True) is None
    assert Fraction(over_one="{value} is a length").hint(1.5) == "1.5 is a length"
    assert Fraction(over_one="x").hint(0.5) is None and Fraction().hint(1.5) is None
