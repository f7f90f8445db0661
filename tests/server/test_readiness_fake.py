"""Readiness decisions against a scripted HTTP server: fallback, auth, attach fail-fast, validate modes."""

from __future__ import annotations

import socket
import time

import pytest
from fakehttp import SERVER_INFO, fake_server, json_answer

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError, SchemaMismatch, ServerUnavailable
from pytest_sglang.server import attach
from pytest_sglang.server.probe import Target
from pytest_sglang.server.readiness import wait_until_ready
from pytest_sglang.server.url import parse_server_url
from pytest_sglang.server.validation import SchemaWarning


def _ok(_: dict[str, str]) -> tuple[int, str, None]:
    return 200, "", None


def test_server_info_404_falls_back_to_get_server_info() -> None:
    with fake_server({"/health": _ok, "/get_server_info": lambda h: json_answer(SERVER_INFO)}) as fake:
        server = attach(fake.url)
        assert server.info_endpoint == "/get_server_info"
        assert server.info()["max_total_num_tokens"] == 4096
        # A single server's attach asks nothing of a gateway (fleet.connect asks GET /workers above it)
        assert [p for p, _ in fake.hits][:3] == ["/health", "/server_info", "/get_server_info"]


def test_health_is_judged_by_status_code_only() -> None:
    calls = {"n": 0}

    def health(_: dict[str, str]) -> tuple[int, str, None]:
        calls["n"] += 1
        return (503, "", None) if calls["n"] < 3 else (200, "", None)

    with fake_server({"/health": health, "/server_info": lambda h: json_answer(SERVER_INFO)}) as fake:
        result = wait_until_ready(Target(parse_server_url(fake.url), "attach"), 10)
    assert result.probes == 3 and result.info is not None


def test_bearer_token_is_sent_and_401_names_the_option() -> None:
    redaction.register("k-123456")

    def info(headers: dict[str, str]) -> tuple[int, str, str]:
        if headers.get("authorization") != "Bearer k-123456":
            return 401, '{"error":"Unauthorized"}', "application/json"
        return json_answer(SERVER_INFO)

    with fake_server({"/health": _ok, "/server_info": info}) as fake:
        assert attach(fake.url, api_key="k-123456").info()["model_path"] == "models/tiny-llama"
        with pytest.raises(ConfigError) as excinfo:
            attach(fake.url, api_key="wrong-key-999")
    message = str(excinfo.value)
    assert message.startswith("--sglang-api-key='***': GET /server_info at http://127.0.0.1:")
    assert "answered 401" in message and "Fix: pass the server's --api-key as --sglang-api-key" in message
    assert "wrong-key-999" not in message


def test_attach_to_a_closed_port_fails_fast() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(ServerUnavailable) as excinfo:
        attach(f"http://127.0.0.1:{port}")
    assert time.monotonic() - t0 < 5
    lines = str(excinfo.value).splitlines()
    assert lines[0].startswith(
        f"SGLang server http://127.0.0.1:{port} (mode=attach) does not accept connections"
    )
    assert lines[1].startswith("Last probe: GET /health -> connection refused")
    assert lines[2].startswith(
        "Fix: start the server first or correct --sglang-url (ini sglang_url, env PYTEST_SGLANG_URL)"
    )


def test_attach_to_a_never_healthy_server_gives_up_at_its_timeout() -> None:
    with fake_server({"/health": lambda h: (503, "", None)}) as fake:
        with pytest.raises(ServerUnavailable) as excinfo:
            attach(fake.url, timeout_s=1.0)
    lines = str(excinfo.value).splitlines()
    assert "(mode=attach) is not healthy after 1." in lines[0]
    assert lines[1] == "Last probe: GET /health -> 503"
    assert lines[2].startswith("Fix: wait until the server has finished warming up")


def test_not_json_is_a_schema_mismatch_in_strict_mode() -> None:
    with fake_server(
        {"/health": _ok, "/server_info": lambda h: (200, "<html>oops</html>", "text/html")}
    ) as fake:
        with pytest.raises(SchemaMismatch) as excinfo:
            attach(fake.url)
        assert "$: the body is not JSON (content-type text/html): '<html>oops</html>'" in str(excinfo.value)
        server = attach(fake.url, validate="off")
        assert server.initial_info is None


def test_warn_mode_warns_and_continues() -> None:
    broken = {k: v for k, v in SERVER_INFO.items() if k != "max_req_input_len"}
    with fake_server({"/health": _ok, "/server_info": lambda h: json_answer(broken)}) as fake:
        with pytest.warns(SchemaWarning, match="'max_req_input_len' is a required property"):
            server = attach(fake.url, validate="warn")
    assert server.initial_info is not None


def test_info_redacts_secrets_everywhere() -> None:
    leaky = {
        **SERVER_INFO,
        "api_key": "leaky-key-42",
        "admin_api_key": "admin-key-42",
        "launch_command": "--model-path m --api-key leaky-key-42",
        "internal_states": [{**SERVER_INFO["internal_states"][0], "api_key": "leaky-key-42"}],
    }
    with fake_server({"/health": _ok, "/server_info": lambda h: json_answer(leaky)}) as fake:
        info = attach(fake.url).info()
    text = repr(info)
    assert "leaky-key-42" not in text and "admin-key-42" not in text
    assert info["api_key"] == "<redacted>" and info["launch_command"].endswith("--api-key ***")


def test_metrics_parsed_and_404_explained() -> None:
    text = (
        "# HELP sglang:num_running_reqs x\n# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="m",tp_rank="0"} 3.0\n'
        "# HELP sglang:num_requests_total x\n# TYPE sglang:num_requests_total counter\n"
        'sglang:num_requests_total{is_streaming="true"} 2.0\nsglang:num_requests_total{is_streaming="false"} 5.0\n'
    )
    routes = {
        "/health": _ok,
        "/server_info": lambda h: json_answer(SERVER_INFO),
        "/metrics": lambda h: (200, text, "text/plain; version=0.0.4"),
    }
    with fake_server(routes) as fake:
        server = attach(fake.url)
        metrics = server.metrics()
        assert metrics["sglang:num_running_reqs"][0].labels["tp_rank"] == "0"
        from pytest_sglang.sglang.metrics_text import value

        assert value(metrics, "sglang:num_requests_total") == 7.0
        assert value(metrics, "sglang:num_requests_total", is_streaming="true") == 2.0
        assert server.health() == 200 and server.log_tail() == [] and server.stop() is None
        del fake.routes["/metrics"]
        with pytest.raises(ServerUnavailable, match=r"metrics are disabled.\nFix: add --enable-metrics"):
            server.metrics()


@pytest.mark.parametrize("validate", ["strict", "off"])
def test_the_schema_is_compiled_while_the_server_starts_not_after_its_first_200(validate: str) -> None:
    from pytest_sglang.server import validation

    compiled_at_info: list[int] = []
    health = iter([503, 503])

    def server_info(_: dict[str, str]) -> tuple[int, str, str | None]:
        compiled_at_info.append(validation._validator.cache_info().currsize)
        return json_answer(SERVER_INFO)

    validation._validator.cache_clear()
    with fake_server({"/health": lambda h: (next(health, 200), "", None), "/server_info": server_info}) as fake:
        attach(fake.url, validate=validate)
    # While /health said 503 the wait compiled the schema (unless validation is off): not after the 200.
    assert compiled_at_info == [1 if validate == "strict" else 0]
