"""A path given as the separate value of a pytest-sglang option must not move pytest's rootdir unseen."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.plugin.rootdir import check_separate_path_values


def test_an_outside_path_as_a_separate_word_is_refused_with_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-python", sys.executable)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --sglang-python='{sys.executable}': given as a separate word, an existing "
                                 "path counts as a test path when pytest picks its rootdir and ini file, before it "
                                 "knows this option (pytest-dev/pytest#8846): the rootdir became *. Fix: write "
                                 f"--sglang-python={sys.executable}"])
    assert "passed" not in result.stdout.str()


def test_the_same_path_through_pytest_addopts_is_refused_too(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile("def test_x(): pass")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--sglang-python {sys.executable}")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --sglang-python=*given as a separate word*"])


@pytest.mark.parametrize("args", [
    [f"--sglang-python={sys.executable}"],  # one word: pytest sets the value aside
    ["--sglang-log-dir", "logs"],  # inside the directory pytest starts from: the rootdir stays
    ["--sglang-launch", "--model-path /"],  # not a path: a value that starts with a dash
])
def test_one_word_an_inside_path_and_a_non_path_run(pytester: pytest.Pytester, args: list[str]) -> None:
    pytester.makepyfile("def test_x(): pass")
    (pytester.path / "logs").mkdir()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert "given as a separate word" not in result.stderr.str()
    result.stdout.fnmatch_lines([f"rootdir: {pytester.path}"])


def test_a_value_no_path_can_have_is_left_to_its_option(tmp_path: Path) -> None:
    check_separate_path_values(["--sglang-run-label", "a\x00b", "--sglang-log-dir", "logs"], tmp_path, tmp_path)
    with pytest.raises(ConfigError, match=r"^--sglang-log-dir='/': given as a separate word"):
        check_separate_path_values(["--sglang-run-label", "a\x00b", "--sglang-log-dir", "/"], tmp_path, tmp_path)
