"""Attach: one deadline, and one diagnosis and fix per way a URL can fail (not "start the server first")."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest
from fakehttp import SERVER_INFO, fake_server, json_answer, raw_server, read_request

from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.server import attach


def _ok(_: dict[str, str]) -> tuple[int, str, None]:
    return 200, "", None


def _failure(url: str, **kwargs: float) -> tuple[list[str], float]:
    t0 = time.monotonic()
    with pytest.raises(ServerUnavailable) as excinfo:
        attach(url, **kwargs)
    return str(excinfo.value).splitlines(), time.monotonic() - t0


def test_a_server_that_never_answers_ends_at_the_timeout_given() -> None:
    def hang(sock: socket.socket, stopping: threading.Event) -> None:
        read_request(sock)
        stopping.wait(60)

    with raw_server(hang) as url:
        lines, took = _failure(url, timeout_s=2.0)
    assert took < 6, f"attach with timeout_s=2 took {took:.1f}s"
    assert re.fullmatch(rf"SGLang server {re.escape(url)} \(mode=attach\) accepts connections but never answered "
                        r"GET /health \(the last probe waited [12]\.\ds\) \(1 probes in 2\.\ds\)", lines[0]), lines[0]
    # One deadline: asking GET /workers first (is it a gateway?) took part of the 2 s
    assert re.fullmatch(r"Last probe: GET /health -> no answer within [12]s", lines[1]), lines[1]
    assert lines[2].startswith("Fix: the server may be hung or overloaded: read its log")


def test_health_404_says_not_sglang_at_this_address() -> None:
    with fake_server({}) as fake:
        lines, took = _failure(fake.url + "/v1")
    assert took < 3
    assert lines[0].startswith(f"SGLang server {fake.url}/v1 (mode=attach) answers GET /health with 404: not an "
                               "SGLang server at this address; body: '{\"detail\":\"Not Found\"}'")
    assert lines[2] == ("Fix: point --sglang-url at the SGLang server itself (the host:port of "
                        "sglang.launch_server, without the path '/v1'); a gateway or router in front of it "
                        "must serve /health.")


def test_a_redirect_names_its_target_and_suggests_that_url() -> None:
    def redirect(sock: socket.socket, stopping: threading.Event) -> None:
        read_request(sock)
        sock.sendall(b"HTTP/1.1 301 Moved Permanently\r\nlocation: https://sglang.internal:8443/health\r\n"
                     b"content-length: 0\r\n\r\n")

    with raw_server(redirect) as url:
        lines, took = _failure(url)
    assert took < 3
    assert lines[0].startswith(f"SGLang server {url} (mode=attach) redirects GET /health to "
                               "https://sglang.internal:8443/health")
    assert lines[1] == "Last probe: GET /health -> 301 (redirect to https://sglang.internal:8443/health)"
    assert lines[2] == "Fix: use the address it redirects to: --sglang-url https://sglang.internal:8443."


def test_server_info_500_while_healthy_is_a_server_bug_with_the_body() -> None:
    routes = {"/health": _ok,
              "/server_info": lambda h: (500, "Traceback: KeyError 'internal_states' \x1b[31m!", "text/plain")}
    with fake_server(routes) as fake:
        lines, took = _failure(fake.url, timeout_s=20)
    assert took < 5
    assert lines[0].startswith(f"SGLang server {fake.url} (mode=attach) answers GET /health with 200 but GET "
                               "/server_info with 500: the server fails to describe itself (a server bug); "
                               "body: \"Traceback: KeyError 'internal_states' !\"")
    assert "\x1b" not in "\n".join(lines)  # server text is cleaned of escape sequences
    assert lines[2].startswith("Fix: read the server's log for the error behind /server_info")


def test_no_server_info_at_all_is_not_sglang() -> None:
    with fake_server({"/health": _ok}) as fake:
        lines, took = _failure(fake.url, timeout_s=20)
    assert took < 3
    assert lines[0].startswith(f"SGLang server {fake.url} (mode=attach) answers GET /health with 200 but has "
                               "neither /server_info nor /get_server_info (404): not an SGLang server")
    assert lines[1].startswith("Last probe: GET /get_server_info -> 404")


def test_https_to_a_plain_http_server_says_use_http() -> None:
    with fake_server({"/health": _ok}) as fake:
        https = fake.url.replace("http://", "https://")
        lines, took = _failure(https)
    assert took < 3
    assert lines[0].startswith(f"SGLang server {https} (mode=attach) speaks plain http, not https")
    assert lines[2] == f"Fix: use --sglang-url {fake.url}."


def test_a_connection_closed_without_an_answer_is_named() -> None:
    def close(sock: socket.socket, stopping: threading.Event) -> None:
        read_request(sock)

    with raw_server(close) as url:
        lines, took = _failure(url, timeout_s=20)
    assert took < 5
    assert lines[0].startswith(f"SGLang server {url} (mode=attach) closed the connection without answering "
                               "GET /health")
    assert lines[1].startswith("Last probe: GET /health -> connection closed without an answer")
    assert lines[2].startswith("Fix: check that --sglang-url points at an HTTP server")


def test_health_503_still_says_warming_up() -> None:
    with fake_server({"/health": lambda h: (503, "", None)}) as fake:
        lines, _ = _failure(fake.url, timeout_s=1.0)
    assert "(mode=attach) is not healthy after 1." in lines[0]
    assert lines[2].startswith("Fix: wait until the server has finished warming up")


def test_proxy_credentials_go_as_basic_auth_and_never_show() -> None:
    def guarded(headers: dict[str, str]) -> tuple[int, str, str | None]:
        if headers.get("authorization") != "Basic dXNlcjpzM2NyZXQtcHctOTk=":
            return 401, "", None
        return json_answer(SERVER_INFO)

    with fake_server({"/health": _ok, "/server_info": guarded}) as fake:
        url = fake.url.replace("http://", "http://user:s3cret-pw-99@")
        server = attach(url)
        assert server.url == fake.url and str(server.server_url) == fake.url.replace("//", "//user:***@")
        assert "s3cret" not in repr(server) and server.info()["max_total_num_tokens"] == 4096
        with fake_server({"/health": lambda h: (401, "", None)}) as other:
            lines, _ = _failure(other.url.replace("http://", "http://user:s3cret-pw-99@"))
    assert "s3cret" not in "\n".join(lines)
    assert "answers GET /health with 401: a proxy asks for credentials" in lines[0]
