"""Inner test file: every sglang_ab keyword with a bad value fails the test naming it (nothing launched)."""

from __future__ import annotations

import pytest

from pytest_sglang import LoadSpec

LOAD = {"requests": 4, "input_len": 16, "output_len": 8, "warmup": 0}


@pytest.mark.parametrize("bad", [
    {"launches": 1}, {"launches": "3"}, {"order": "shuffled"}, {"seed": -1}, {"alpha": 0.7}, {"power": 1.0},
    {"timeout_s": 0}, {"max_regression": "five"}, {"max_regression": "0%"}, {"launch_b": "--model-path M --tp-szie 2"},
    {"launch_b": "--model-path 'M"}, {"reqests": 4}, {"max_regression": 5}, {"launch_b": 7},
])
def test_bad(sglang_ab, bad):
    sglang_ab(**{**LOAD, **bad})


def test_spec_and_fields(sglang_ab):
    sglang_ab(LoadSpec(requests=4), requests=4)
