"""Issue 31: a command flag that is a plugin setting is mapped to it once (cli/common.SETTING_OF_FLAG)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest_sglang
from pytest_sglang.cli import compare, golden, load
from pytest_sglang.cli import eval as eval_cli
from pytest_sglang.cli.common import SETTING_OF_FLAG, add_server_flags, in_flag_words
from pytest_sglang.plugin.options import OPTIONS_BY_NAME

CLI = Path(pytest_sglang.__file__).parent / "cli"


def _defaults(parser: argparse.ArgumentParser, *argv: str) -> argparse.Namespace:
    return parser.parse_args(list(argv))


def test_every_flag_names_a_setting() -> None:
    assert all(setting in OPTIONS_BY_NAME for setting in SETTING_OF_FLAG.values())


def test_the_commands_start_from_the_settings_defaults() -> None:
    check = _defaults(golden.build_parser(), "check", "--url", "http://h:1", "--golden", "g.json")
    assert check.min_match == OPTIONS_BY_NAME["sglang_golden_min_match"].default
    assert check.max_logprob_delta == OPTIONS_BY_NAME["sglang_golden_max_logprob_delta"].default
    assert _defaults(compare._parser(), "a.json", "b.json").max_regression == \
        OPTIONS_BY_NAME["sglang_max_regression"].default


def test_server_flags_come_from_one_helper_with_the_plugins_key_sources() -> None:
    p = argparse.ArgumentParser()
    add_server_flags(p)
    text = p.format_help()
    assert "PYTEST_SGLANG_API_KEY or SGLANG_API_KEY" in " ".join(text.split())
    for parser in (load.build_parser(), eval_cli.build_parser()):
        assert {"--url", "--api-key"} <= set(parser._option_string_actions)
    declared_here = [p.name for p in CLI.glob("*.py") if p.name != "common.py"
                     and re.search(r"add_argument\(\s*\"--(url|api-key)\"", p.read_text())]
    assert declared_here == []


def test_messages_read_back_in_the_commands_words() -> None:
    text = "--sglang-max-regression=7: bad; --sglang-url=x"
    assert in_flag_words(text) == "--max-regression=7: bad; --url=x"


def test_eval_builds_its_harness_from_the_one_flag_mapping() -> None:
    from pytest_sglang.accuracy import Harness

    args = eval_cli.build_parser().parse_args(
        ["--url", "http://h:1", "--task", "gsm8k", "--data", "d.jsonl", "--num-examples", "30", "--shots", "2",
         "--route", "chat", "--max-tokens", "64", "--temperature", "0.5", "--concurrency", "4",
         "--request-timeout", "9", "--seed", "7", "--confidence", "0.9", "--hub-timeout", "11"])
    assert eval_cli.harness_from(args) == Harness(
        task="gsm8k", num_examples=30, shots=2, route="chat", max_tokens=64, temperature=0.5, concurrency=4,
        request_timeout_s=9, data=Path("d.jsonl"), seed=7, confidence=0.9, hub_timeout_s=11.0)
