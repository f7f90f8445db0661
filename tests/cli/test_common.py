"""What the commands share: capped reads, writable outputs, the API key's sources, values checked by the marker."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_sglang.cli.common import api_key, keyword_type
from pytest_sglang.errors import ConfigError
from pytest_sglang.files import DEFAULT_CAP, check_writable, read_capped
from pytest_sglang.gates.correctness.accuracy import run_marker

MIN_SCORE = keyword_type(run_marker, "min_score", "--min-score")
NUM_EXAMPLES = keyword_type(run_marker, "num_examples", "--num-examples")


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk (nothing is written)."""
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def test_a_file_beyond_the_cap_is_refused_unread_with_option_path_size_and_cap(tmp_path: Path) -> None:
    big = sparse(tmp_path / "big.json", DEFAULT_CAP + 1)
    with pytest.raises(ConfigError) as info:
        read_capped(big, option="--baseline", fix="unused", too_large_fix="pass an eval --json output")
    assert str(info.value) == (f"--baseline='{big}': is 64.0 MiB, larger than the 64.0 MiB cap of a file read "
                               "whole. Fix: pass an eval --json output")
    assert read_capped(sparse(tmp_path / "ok", 10), option="x", fix="f") == b"\0" * 10


def test_a_missing_file_names_the_option_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--prompts='.*nope': cannot be read \(No such file or directory\). "
                                          r"Fix: pass a text file$"):
        read_capped(tmp_path / "nope", option="--prompts", fix="pass a text file")


def test_unwritable_outputs_are_refused_and_nothing_is_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"--json='.*file/out.json': cannot be created: .*file is a file, not a "
                                          r"directory. Fix: give --json a file path in a writable directory"):
        check_writable(tmp_path / "file" / "out.json", option="--json", what="the result")
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        check_writable(tmp_path, option="--out", what="the recording")
    check_writable(tmp_path / "new" / "deeper" / "out.json", option="--json", what="the result")
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_the_api_key_comes_from_the_flag_then_the_plugins_variables() -> None:
    env = {"SGLANG_API_KEY": "sk-env", "PYTEST_SGLANG_API_KEY": "sk-plugin"}
    assert api_key("sk-flag", env).source == "--api-key"
    assert (api_key(None, env).value, api_key(None, env).source) == ("sk-plugin", "env PYTEST_SGLANG_API_KEY")
    assert api_key(None, {"SGLANG_API_KEY": "sk-env"}).source == "env SGLANG_API_KEY"
    assert api_key(None, {}).value is None and api_key(None, {}).shown == "(not set)"


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_min_score_is_a_fraction_as_for_the_marker(value: float) -> None:
    if 0 <= value <= 1:
        assert MIN_SCORE(repr(value)) == value
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be a number from 0 to 1 \(a fraction"):
            MIN_SCORE(repr(value))


@given(st.integers())
def test_num_examples_has_the_markers_cap(value: int) -> None:
    if 1 <= value <= 100_000:
        assert NUM_EXAMPLES(str(value)) == value
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be a whole number from 1 to 100,000, or 'all'"):
            NUM_EXAMPLES(str(value))


def test_a_percent_written_as_a_number_gets_the_fraction_meant() -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        MIN_SCORE("90")
    assert str(info.value) == ("invalid value '90': must be a number from 0 to 1 (a fraction: 0.01 = 1%). "
                               "Fix: pass --min-score 0.9")
    assert NUM_EXAMPLES("all") == "all"
