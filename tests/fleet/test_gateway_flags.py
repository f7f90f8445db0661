"""The gateway's own credential flags never reach the gateway log in clear; its typos stop a launch early."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.fleet.gateway import GatewayCommand, check_args_for, start_gateway
from pytest_sglang.sglang import masks


def test_the_first_log_line_masks_smg_only_credentials_in_any_spelling(tmp_path: Path) -> None:
    # Before: --oracle-password, --tenant-api-key (and abbreviations) were written in clear.
    log = tmp_path / "gateway.log"
    argv = [sys.executable, "-c", "pass", "--oracle-pass", "PASS-1111-A", "--tenant-api-key=team:KEY-1111-B",
            "--postgres-db-url", "postgres://u:PASS-1111-C@db/x", "--policy", "cache_aware"]
    proc = start_gateway(argv, url="http://127.0.0.1:1", log_path=log, env={})
    proc.popen.wait(timeout=30)
    first = log.read_text().splitlines()[0]
    for secret in ("PASS-1111-A", "KEY-1111-B", "PASS-1111-C"):
        assert secret not in first
        assert redaction.scrub(f"x {secret} y") == "x *** y"  # registered: masked in every later writer too
    assert "--oracle-pass *** --tenant-api-key=*** --postgres-db-url *** --policy cache_aware" in first


def test_the_resolved_gateway_refuses_what_its_recorded_release_would() -> None:
    router = GatewayCommand(("python", "-m", "sglang_router.launch_router"), "sglang-router", "0.3.2")
    with pytest.raises(ConfigError, match="--tenant-api-key: not a flag of the installed gateway"):
        check_args_for(router, ("--tenant-api-key", "t:KEY-2222-D"))
    smg = GatewayCommand(("smg", "launch"), "smg", "1.13.0")
    assert check_args_for(smg, ("--tenant-api-key", "t:KEY-2222-D")) == []


@pytest.fixture(autouse=True)
def _forget_secrets() -> None:
    redaction.clear()


def test_a_leftover_gateways_command_line_is_masked_as_the_gateway_reads_it() -> None:
    # scrub_argv serves every command line found on the machine (leftovers of earlier runs): nothing registered.
    shown = masks.scrub_argv(["/venv/bin/smg", "launch", "--oracle-pass", "PASS-3333-E",
                                     "--api-ke", "KEY-3333-F", "--policy", "random"])
    assert shown == ["/venv/bin/smg", "launch", "--oracle-pass", "***", "--api-ke", "***", "--policy", "random"]
