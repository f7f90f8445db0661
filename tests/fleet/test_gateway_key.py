"""A launched gateway with its own API key (issue 22): ``--sglang-gateway "--api-key K"`` made the gateway answer
401 and the plugin poll "not a worker list" until the 1,800 s startup deadline. Now the plugin sends the key it
knows, and a 401/403 ends the wait at once, naming the key (masked)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fleet_helpers import SIM_LAUNCH, copy_inner, run_inner, smg_command

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.fleet.readiness import GatewayTarget, gateway_client_key, wait_gateway_ready
from pytest_sglang.server.url import parse_server_url
from tests.server.fakehttp import fake_server, json_answer

KEY = "gw-sekrit-7f3a9c"
MISSING = (401, '{"error":{"message":"Missing API key: send it as `Authorization: Bearer <key>`"}}',
           "application/json")


def _locked_gateway(key: str) -> dict[str, object]:
    def workers(headers: dict[str, str]) -> tuple[int, str, str | None]:
        if headers.get("authorization") != f"Bearer {key}":
            return MISSING
        return json_answer({"workers": [{"url": "http://127.0.0.1:9", "is_healthy": True, "labels": {}}]})

    return {"/workers": workers, "/readiness": lambda h: json_answer({"healthy_workers": 1, "total_workers": 1})}


@pytest.mark.parametrize(("args", "run_key", "expected"), [
    (("--api-key", KEY), None, (KEY, "--api-key in --sglang-gateway")),
    ((f"--api-key={KEY}", "--policy", "round_robin"), "run-key-1234", (KEY, "--api-key in --sglang-gateway")),
    (("--policy", "round_robin"), "run-key-1234", ("run-key-1234", "--sglang-api-key")),
    ((), None, (None, "")),
])
def test_the_key_sent_to_a_launched_gateway(args: tuple[str, ...], run_key: str | None,
                                            expected: tuple[str | None, str]) -> None:
    assert gateway_client_key(args, run_key) == expected


def test_a_401_from_a_launched_gateway_fails_at_once_naming_the_masked_key() -> None:
    with fake_server(_locked_gateway(KEY)) as gateway:  # type: ignore[arg-type]
        target = GatewayTarget(parse_server_url(gateway.url), "simulator", api_key=None,
                               gateway_args=("--api-key", KEY), expect_urls=["http://127.0.0.1:9"])
        t0 = time.monotonic()
        with pytest.raises(ConfigError) as excinfo:
            wait_gateway_ready(target, 600.0)
    assert time.monotonic() - t0 < 5  # not the startup deadline
    message = str(excinfo.value)
    assert KEY not in message
    assert message.startswith("--sglang-gateway='--api-key ***': gateway http://127.0.0.1:")
    assert "refused pytest-sglang's requests: GET /workers -> 401: " in message
    assert "pytest-sglang sent no key; the gateway was started with --api-key ***" in message
    assert message.endswith("Fix: give the gateway its client key as --api-key K in --sglang-gateway (pytest-sglang "
                            "sends it to the gateway), or set --sglang-api-key")


def test_the_known_key_opens_the_gateway() -> None:
    with fake_server(_locked_gateway(KEY)) as gateway:  # type: ignore[arg-type]
        key, source = gateway_client_key(("--api-key", KEY), None)
        target = GatewayTarget(parse_server_url(gateway.url), "simulator", api_key=key, key_source=source,
                               expect_urls=["http://127.0.0.1:9"])
        assert [w.url for w in wait_gateway_ready(target, 10.0).workers] == ["http://127.0.0.1:9"]


def test_a_wrong_key_on_attach_fails_at_once_too() -> None:
    with fake_server(_locked_gateway(KEY)) as gateway:  # type: ignore[arg-type]
        target = GatewayTarget(parse_server_url(gateway.url), "attach", api_key="wrong-key-5678",
                               key_source="--sglang-api-key")
        with pytest.raises(ServerUnavailable) as excinfo:
            wait_gateway_ready(target, 600.0)
    message = str(excinfo.value)
    assert "wrong-key-5678" not in message
    assert "pytest-sglang sent the key of --sglang-api-key (Authorization: Bearer ***)" in message
    assert message.splitlines()[-1] == "Fix: pass the gateway's API key with --sglang-api-key (or SGLANG_API_KEY)."


@pytest.fixture(autouse=True)
def _forget_secrets() -> None:
    redaction.clear()


def _launch(tmp_path: Path, gateway_args: str) -> list[str]:
    return ["-s", "--sglang-simulate", "--sglang-workers", "1", "--sglang-launch", SIM_LAUNCH,
            "--sglang-gateway-command", smg_command(), "--sglang-gateway", gateway_args,
            "--sglang-startup-timeout", "1800"]


INNER_KEYED = """
def test_through_the_keyed_gateway(sglang_server, sglang_fleet):
    with sglang_server.client() as client:  # sends the key the plugin knows
        answer = client.post("/generate", json={"text": "Hi", "sampling_params": {"max_new_tokens": 2}})
    assert answer.status_code == 200, answer.text
    print(f"KEYED workers={len(sglang_fleet.workers)}")
"""


@pytest.mark.slow
def test_real_smg_with_an_api_key_is_launched_and_used(tmp_path: Path) -> None:
    (tmp_path / "test_keyed.py").write_text(INNER_KEYED)
    run = run_inner(tmp_path, *_launch(tmp_path, f"--api-key {KEY}"), timeout_s=120)
    assert run.returncode == 0, run.output
    run.fnmatch_lines(["KEYED workers=1*", "*1 passed*"])
    assert KEY not in run.output
    assert run.leftovers() == []


@pytest.mark.slow
def test_real_smg_with_only_a_tenant_key_fails_at_once(tmp_path: Path) -> None:
    copy_inner(tmp_path, "fleet_shape")
    t0 = time.monotonic()
    run = run_inner(tmp_path, *_launch(tmp_path, f"--tenant-api-key team-a:{KEY}"),
                    env={"FLEET_EXPECT_WORKERS": "1"}, timeout_s=120)
    assert time.monotonic() - t0 < 60  # the 1,800 s startup deadline is not waited out
    assert run.returncode != 0
    assert KEY not in run.output
    run.fnmatch_lines(["*refused pytest-sglang's requests: GET /workers -> 401*pytest-sglang sent no key; the "
                       "gateway was started with --tenant-api-key ***. Fix: *(--tenant-api-key keys open the "
                       "serving path only, not GET /workers)*"])
    assert run.leftovers() == []
