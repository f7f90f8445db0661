"""Fuzz: option values (URL, launch args, numbers, every row) from the command line, the environment
and the ini file are either accepted or refused with a ConfigError naming the option as the user
wrote it in that source, never a traceback, and never showing a secret."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_sglang.errors import ConfigError
from pytest_sglang.plugin.settings import OPTIONS, OPTIONS_BY_NAME, Option, resolve

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-0", "0x10", "1_000", "½", "٣", " 5 ", "5s", "", " "]),
)
urls = st.one_of(
    st.sampled_from(["127.0.0.1:30000", "ftp://h", "http://h:99999", "http://h:0", "http://[::1", "http://",
                     "http://u:sk-url-secret@h:1", "https://h:1/a?b#c", "HTTP://H:1", "http://h:-1", "//h:1",
                     "http:/h:1", "http://h:1\x00", "http://h :1", "unix:///tmp/s"]),
    st.builds(lambda scheme, host, port: f"{scheme}{host}{port}",
              st.sampled_from(["http://", "https://", "", "ws://", "http:"]),
              st.text(max_size=8), st.sampled_from(["", ":", ":1", ":65536", ":abc", "/x"])),
)
# A secret is a secret as the value of a secret flag (spelt in full, abbreviated, or with "=").
launch_words = st.sampled_from([
    "--model-path", "m", "--tp", "abc", "--pp", "2", "--tp-size", "8", "--api-ke sk-launch-secret",
    "--port", "x", "'", '"', "\\", "--hicache-write-policy", "write_thru", "--", "-", "--sim-profile", "tiny",
    "--context-length", "1.5", "--enable-hicache", "=", "--api-key=sk-launch-secret", "--api-key sk-launch-secret",
])
launches = st.one_of(st.lists(launch_words, max_size=6).map(" ".join), st.text(max_size=20))
anything = st.one_of(st.text(max_size=30), numbers)


def label(option: Option, source: str) -> str:
    return {"cli": option.cli, "env": f"env {option.env}", "ini": f"ini option {option.name}"}[source]


def _resolve(option: Option, raw: str, source: str) -> None:
    value: object = [raw] if option.kind == "list" and source == "cli" else raw
    cli = {option.name: value} if source == "cli" else {}
    env = {option.env: raw} if source == "env" else {}
    ini = {option.name: raw} if source == "ini" else {}
    resolve(cli, ini, env)


def _check(option: Option, raw: str, source: str) -> None:
    try:
        _resolve(option, raw, source)
    except ConfigError as exc:  # anything else fails the test: a traceback for the user
        text = str(exc)
        assert text.startswith(label(option, source)), text
        assert ". Fix: " in text, text
        for secret in ("sk-url-secret", "sk-launch-secret"):
            assert secret not in text, text
        if option.secret and len(raw.strip()) >= 4:
            assert raw not in text, text


sources = st.sampled_from(["cli", "env", "ini"])


@FUZZ
@given(option=st.sampled_from([o for o in OPTIONS if o.kind not in ("flag", "negatable")]), raw=anything,
       source=sources)
def test_any_text_for_any_option(option: Option, raw: str, source: str) -> None:
    if option.cli_only and source != "cli":
        return
    _check(option, raw, source)


@FUZZ
@given(option=st.sampled_from([o for o in OPTIONS if o.kind in ("flag", "negatable") and not o.cli_only]),
       raw=anything, source=st.sampled_from(["env", "ini"]))
def test_any_text_for_a_switch(option: Option, raw: str, source: str) -> None:
    _check(option, raw, source)


@FUZZ
@given(raw=urls, source=sources)
def test_generated_urls(raw: str, source: str) -> None:
    _check(OPTIONS_BY_NAME["sglang_url"], raw, source)


@FUZZ
@given(raw=launches, source=sources)
@example(raw="--tp ' --api-key sk-launch-secret '", source="ini")  # a key inside one quoted value of another flag
def test_generated_launch_args(raw: str, source: str) -> None:
    _check(OPTIONS_BY_NAME["sglang_launch"], raw, source)


@FUZZ
@given(name=st.sampled_from([o.name for o in OPTIONS if o.number]), raw=numbers, source=sources)
def test_generated_numbers(name: str, raw: str, source: str) -> None:
    option = OPTIONS_BY_NAME[name]
    _check(option, raw, source)
    if raw.strip().lower() in ("nan", "inf", "-inf", "1e999") and name.endswith(("timeout", "_gb")):
        with pytest.raises(ConfigError, match="finite"):
            _resolve(option, raw, source)


# ---- the same, end to end, a few times: a usage error on stderr, no traceback ---------------------
@pytest.mark.parametrize("args", [
    ["--sglang-url=127.0.0.1:30000"], ["--sglang-url=http://u:sk-url-secret@h:99999"],
    ["--sglang-launch=--model-path m --api-ke sk-launch-secret --tp abc"], ["--sglang-launch=--pp 2 '"],
    ["--sglang-startup-timeout=1e999"], ["--sglang-host-memory-reserve-gb=-0.5"],
])
def test_end_to_end_usage_errors(pytester: pytest.Pytester, args: list[str]) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.startswith("ERROR: " + args[0].split("=", 1)[0]), err
    out = err + result.stdout.str()
    assert "Traceback" not in out and "sk-url-secret" not in out and "sk-launch-secret" not in out
