"""One parse of a launch argv, as SGLang 0.5.23 reads it: typed fields, a token map, secrets in every spelling."""

from __future__ import annotations

import dataclasses
import random
import typing

import pytest

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang import args as sglang_args
from pytest_sglang.sglang import tokens as sglang_tokens
from pytest_sglang.sglang.args import (
    ArgToken,
    LaunchArgs,
    command_flags,
    display_argv,
    display_launch,
    flag_choices,
    parse_launch_args,
)
from pytest_sglang.sglang.flags import flags

KEY = "sk-abbrev-7f3a91"


@pytest.fixture(autouse=True)
def _fresh_registry() -> typing.Iterator[None]:
    redaction.clear()
    yield
    redaction.clear()


@pytest.mark.parametrize("spelling", [
    ["--api-key", KEY], ["--api-key=" + KEY], ["--api-ke", KEY], ["--api-ke=" + KEY], ["--api-k", KEY],
])
def test_every_spelling_sglang_accepts_is_the_api_key_and_masked(spelling: list[str]) -> None:
    args = parse_launch_args(["--model-path", "m", *spelling, "--tp", "2"])
    assert args.api_key == KEY  # what SGLang would use, so what the plugin sends as its Bearer token
    assert args.secrets == (KEY,)
    shown = " ".join(args.display())
    assert KEY not in shown and "***" in shown and shown.startswith("--model-path m --api-k")
    assert KEY not in repr(args) and "api_key='***'" in repr(args)


@pytest.mark.parametrize(("given", "dest"), [
    (["--admin-api", "adm-0a1b2c"], "admin_api_key"),
    (["--ssl-keyfile-pass=pw-0a1b2c"], "ssl_keyfile_password"),
    (["--watermark-conf", '{"key": "wm-0a1b2c"}'], "watermark_config"),
])
def test_other_secret_server_args_are_masked(given: list[str], dest: str) -> None:
    args = parse_launch_args(["--model-path", "m", *given])
    secret = given[-1].split("=", 1)[-1]
    assert args.secrets == (secret,)
    assert secret not in " ".join(args.display()) and secret not in repr(args)
    assert [t.dest for t in args.tokens][-len(given):] == [dest] * len(given)


def test_overridden_keys_are_secrets_too() -> None:
    args = parse_launch_args(["--api-key", "first-key-1", "--api-ke=second-key-2"])
    assert args.api_key == "second-key-2"  # argparse: the last one wins
    assert args.secrets == ("first-key-1", "second-key-2")


def test_each_token_knows_the_field_it_feeds() -> None:
    args = parse_launch_args(["--model", "m", "--tp", "8", "--po=4000", "--enable-hicache", "--lora-paths", "a",
                              "b", "--no-enable-tf32-matmul", "--sim-profile", "tiny", "--bogus"])
    assert [(t.text, t.dest, t.role) for t in args.tokens] == [
        ("--model", "model_path", "flag"), ("m", "model_path", "value"),
        ("--tp", "tp_size", "flag"), ("8", "tp_size", "value"),
        ("--po=4000", "port", "inline"),
        ("--enable-hicache", "enable_hierarchical_cache", "flag"),
        ("--lora-paths", "lora_paths", "flag"), ("a", "lora_paths", "value"), ("b", "lora_paths", "value"),
        ("--no-enable-tf32-matmul", "enable_tf32_matmul", "flag"),
        ("--sim-profile", None, "unknown"), ("tiny", None, "unknown"), ("--bogus", None, "unknown"),
    ]
    assert (args.model_path, args.tp_size, args.port, args.enable_hierarchical_cache) == ("m", 8, 4000, True)
    assert args.passthrough == {"enable_tf32_matmul": False, "lora_paths": ("a", "b")}
    assert args.given("port") and args.given("host") is False
    assert args.without("port", "tp_size") == ["--model", "m", "--enable-hicache", "--lora-paths", "a", "b",
                                               "--no-enable-tf32-matmul", "--sim-profile", "tiny", "--bogus"]


@pytest.mark.parametrize(("argv", "problem"), [
    (["--pp", "2"], "ambiguous option: --pp could match --pp-size"),
    (["--tp", "abc"], "argument --tp-size/--tensor-parallel-size: invalid int value: 'abc'"),
    (["--hicache-write-policy", "write_thru"], "invalid choice: 'write_thru'"),
    (["--max-total-tokens", "1m"], "invalid human_readable_int value: '1m'"),  # case-sensitive, as SGLang
    (["--api-key"], "argument --api-key: expected one argument"),
])
def test_what_sglang_rejects_is_a_config_error_without_secrets(argv: list[str], problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_launch_args(["--api-ke", KEY, *argv], source="--sglang-launch")
    text = str(info.value)
    assert text.startswith(f"--sglang-launch='--api-ke *** {' '.join(argv)}': SGLang would reject these launch "
                           "args (")
    assert problem in text and KEY not in text


def test_an_argv_sglang_rejects_is_still_masked_cautiously() -> None:
    # argparse quotes the token it cannot place; the key in it is masked all the same.
    with pytest.raises(ConfigError) as info:
        parse_launch_args([f"--a={KEY}"])
    assert KEY not in str(info.value)
    assert display_argv(["--tp", "x", "--api-k", KEY]) == ["--tp", "x", "--api-k", "***"]


def test_a_full_command_line_is_read_too() -> None:
    line = ["/venv/bin/python", "-m", "sglang.launch_server", "--api-ke", KEY, "--", "--api-key", "after-dash-9"]
    # After "--" SGLang reads nothing as a flag (it would refuse to start); a reader would, so it is masked.
    assert display_argv(line) == ["/venv/bin/python", "-m", "sglang.launch_server", "--api-ke", "***", "--",
                                  "--api-key", "***"]


def test_command_flags_are_what_follows_the_module() -> None:
    assert command_flags(["python", "-m", "sglang.launch_server", "--api-key", "K", "--tp", "2"]) == (
        "--api-key", "K", "--tp", "2")
    assert command_flags(["torchrun", "--nnodes", "2", "-m", "sglang.launch_server"]) == ()
    assert command_flags(["sglang", "serve", "--tp", "2"]) == ("--tp", "2")
    assert command_flags(["/opt/sglang-server"]) == ()
    assert display_launch(["K-value-1234", "--tp", "2"], ["python", "-m", "sglang.launch_server", "--api-key"]) == [
        "***", "--tp", "2"]


def test_launch_args_fields_are_typed_as_sglang_types_them() -> None:
    """The modelled fields follow SGLang's own ``type=`` (read from 0.5.23's flag table)."""
    table = {flag.dest: flag for flag in flags()}
    expected = {"int": int, "human_readable_int": int, "float": float, "str": str, "-": bool}
    hints = typing.get_type_hints(LaunchArgs)
    for field in dataclasses.fields(LaunchArgs):
        if field.name in ("given_other", "unknown", "tokens"):
            continue
        flag = table[field.name]
        kinds = set(typing.get_args(hints[field.name])) or {hints[field.name]}
        assert expected[flag.value_type] in kinds, field.name
        if flag.choices and field.default is not None:
            assert field.default in flag.choices, field.name
    assert flag_choices("--hicache-write-policy") == ("write_back", "write_through", "write_through_selective")


def test_token_map_agrees_with_argparse_on_random_argvs() -> None:
    """The map is built from argparse's own uses; it must never disagree with argparse's extras."""
    pool = ["--model-path", "m", "--tp", "2", "--api-ke", KEY, "--api-key=k2-0a1b", "--lora-paths", "a", "b",
            "--model-checksum", "--enable-hicache", "--bogus", "v", "--sim-profile", "tiny", "--po=1234",
            "--hicache-ratio", "-1", "--no-enable-tf32-matmul", "--disable-cuda-graph", "x y", "--", "7"]
    rng = random.Random(1234)
    accepted = 0
    for _ in range(400):
        argv = tuple(rng.choice(pool) for _ in range(rng.randint(0, 10)))
        try:
            _, extras, uses = sglang_tokens.run(sglang_args._sglang_parser(), argv)
        except sglang_tokens.Rejected:
            continue
        tokens = sglang_tokens.align(argv, uses, extras)
        assert tokens is not None, argv
        assert [t.text for t in tokens] == list(argv)
        accepted += 1
    assert accepted > 100


def test_secret_tokens_show_masked() -> None:
    assert ArgToken("--api-key=" + KEY, "api_key", "inline").shown() == "--api-key=***"
    assert ArgToken(KEY, "api_key", "value").shown() == "***"
    assert ArgToken("8", "tp_size", "value").shown() == "8"


def test_secret_env_names_and_values_never_registered_by_accident() -> None:
    for name in ("HF_TOKEN", "PGPASSWORD", "MYSQL_PWD", "DB_PASS", "SSH_PRIVATE_KEY", "AWS_CREDENTIALS",
                 "GITHUB_AUTH", "OPENAI_API_KEY", "SESSION_COOKIE"):
        assert redaction.is_secret_env_name(name), name
    assert not redaction.is_secret_env_name("CUDA_VISIBLE_DEVICES")
    # A harmless value under a secret-looking name must not mask every "true" in every report.
    redaction.register_env({"SGLANG_DIAG_BYPASS_HEALTH_GENERATE": "true", "MY_PASS_COUNT": "20",
                            "DB_PASSWORD": "hunter2-long"})
    assert redaction.known() == frozenset({"hunter2-long"})
