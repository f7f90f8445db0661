"""``parse_server_url``: one typed value, credentials apart and masked, bad text refused at once."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.server.client import auth_header
from pytest_sglang.server.url import ServerURL, mask_userinfo, parse_server_url


@pytest.fixture(autouse=True)
def _forget_secrets() -> None:
    redaction.clear()


def test_credentials_are_kept_apart_and_masked_everywhere() -> None:
    url = parse_server_url("http://alice:s3cret-pw-42@gpu-7:30000/sglang/")
    assert (url.scheme, url.host, url.port, url.path) == ("http", "gpu-7", 30000, "/sglang")
    assert url.base == "http://gpu-7:30000/sglang"
    assert str(url) == "http://alice:***@gpu-7:30000/sglang"
    assert repr(url) == "ServerURL('http://alice:***@gpu-7:30000/sglang')"
    assert "s3cret" not in f"{url!r} {url} {url.base} {[url]}"
    # Registered at once: a copy of the raw text anywhere is masked too.
    assert redaction.scrub("--sglang-url=http://alice:s3cret-pw-42@gpu-7") == "--sglang-url=http://alice:***@gpu-7"


def test_basic_auth_unless_an_api_key_wins() -> None:
    url = parse_server_url("https://bob:p%40ss@[::1]:8443")
    assert url.netloc == "[::1]:8443" and url.password == "p@ss"
    assert url.basic_auth() == "Basic Ym9iOnBAc3M="
    assert auth_header(None, url) == {"Authorization": "Basic Ym9iOnBAc3M="}
    assert auth_header("sk-key-1234", url) == {"Authorization": "Bearer sk-key-1234"}
    assert url.auth_note(api_key_given=True) == (
        "the API key wins (Authorization: Bearer); the URL's user:password is not sent")
    assert parse_server_url("http://h:1").auth_note(api_key_given=True) is None
    assert redaction.scrub("p%40ss and p@ss") == "*** and ***"


def test_a_user_name_alone_is_treated_as_a_token() -> None:
    url = parse_server_url("https://ghp_tokenvalue123@gateway:443")
    assert str(url) == "https://***@gateway:443" and url.basic_auth() == "Basic Z2hwX3Rva2VudmFsdWUxMjM6"
    assert redaction.scrub("ghp_tokenvalue123") == "***"
    assert mask_userinfo("tok@h:1") == "***@h:1"


def test_a_url_without_port_gets_the_scheme_default() -> None:
    assert parse_server_url("http://localhost").port == 80
    assert parse_server_url(" HTTPS://Example.org ").base == "https://example.org:443"


@pytest.mark.parametrize(
    ("text", "problem", "fix"),
    [
        ("127.0.0.1:30000", "the URL has no scheme://", "write http://127.0.0.1:30000"),
        ("http:/127.0.0.1:30000", "the URL has no scheme://", "write http://127.0.0.1:30000"),
        ("ftp://127.0.0.1:30000", "the scheme ftp:// is not supported", "write http://127.0.0.1:30000"),
        ("http://127.0.0.1:99999", "the port is not a number from 1 to 65535", "write a port from 1 to 65535"),
        ("http://:30000", "the URL has no host", "write the server's host and port"),
        ("", "the URL is empty", "give the server's address"),
        ("http://h:0", "port 0 is not a server's port", "write the port the server listens on"),
        ("http://h:1/?x=1", "the URL has a query or fragment", "give the server's base URL only"),
        ("http://a b:1", "the URL contains spaces or control characters", "give one URL without spaces"),
        ("http://[::1", "the URL cannot be parsed", "write http://HOST:PORT"),
        ("http://h!x:1", "'h!x' is not a host name or IP address", "write the server's host and port"),
    ],
)
def test_bad_urls_are_refused_with_the_option_value_and_fix(text: str, problem: str, fix: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_server_url(text)
    message = str(excinfo.value)
    assert message.startswith(f"--sglang-url={text.strip()!r}: {problem}"), message
    assert f"Fix: {fix}" in message


def test_a_refused_url_never_shows_its_password() -> None:
    with pytest.raises(ConfigError) as excinfo:
        parse_server_url("ftp://u:hunter2@h:1")
    assert "hunter2" not in str(excinfo.value) and "u:***@h:1" in str(excinfo.value)
    with pytest.raises(ConfigError) as excinfo:
        parse_server_url("u:pw@h:1", source="env PYTEST_SGLANG_URL")
    assert str(excinfo.value).startswith("env PYTEST_SGLANG_URL='u:***@h:1': the URL has no scheme")
    assert mask_userinfo("http://u:p@h/x@y") == "http://u:***@h/x@y"


_TEXT = st.text(alphabet=string.printable + "é\u202e\x00", max_size=40)


@settings(max_examples=400, deadline=None, database=None)
@given(st.one_of(_TEXT, st.builds("{}://{}".format, _TEXT, _TEXT),
                 st.builds("http://{}:{}".format, _TEXT, st.integers(-10, 10**6))))
def test_fuzz_any_text_is_a_url_or_a_config_error_naming_the_option(text: str) -> None:
    try:
        url = parse_server_url(text)
    except ConfigError as exc:
        assert str(exc).startswith("--sglang-url=") and "Fix: " in str(exc)
        return
    assert isinstance(url, ServerURL) and url.scheme in ("http", "https") and 1 <= url.port <= 65535
    assert parse_server_url(url.base) == ServerURL(url.scheme, url.host, url.port, url.path)
