"""The gateways' recorded flags (smg 1.13.0, sglang-router 0.3.2): the recording, typos and credentials."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang.gateway_args import (
    GATEWAYS,
    SECRET_DESTS,
    check_gateway_flags,
    display_gateway_argv,
    gateway_secrets,
    gateway_values,
)

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "scripts" / "gateway" / "record_flags.py"
ROUTER_PYTHON = os.environ.get("SGLANG_ROUTER_PYTHON") or str(
    Path.home() / ".cache" / "pytest-sglang" / "sglang-router" / "bin" / "python")
#: Gateway fields whose names look like credentials but hold none (paths, names, switches, limits).
NOT_SECRETS = frozenset({"oracle_wallet_path", "oracle_username", "oracle_external_auth", "client_key_path",
                         "tls_key_path", "control_plane_audit_enabled", "tokenizer_path", "jwt_issuer", "jwt_audience",
                         "jwt_jwks_uri", "jwt_role_mapping", "mesh_tls_cert", "mesh_tls_ca_cert",
                         "tenant_header_name", "trust_tenant_header", "client_cert_path", "tls_cert_path",
                         "oracle_tns_alias", "postgres_pool_max", "postgres_op_timeout_secs", "redis_pool_max",
                         "redis_retention_days", "redis_op_timeout_secs", "oracle_pool_min", "oracle_pool_max",
                         "oracle_pool_timeout_secs", "kv_index", "tenant_rate_limit_enabled",
                         "tenant_rate_limit_config", "priority_scheduler_tenant_metric_top_n",
                         # URLs' credentials are masked like every URL's (redaction.mask)
                         "worker_urls", "mesh_peer_urls", "routing_key_headers", "routing_key_override"})
_CREDENTIAL_LIKE = re.compile(r"key|password|secret|token$|cred|auth|url|jwt|tenant|oracle|postgres|redis|tls")


def _installed(flavor: str) -> str | None:
    python = sys.executable if flavor == "smg" else ROUTER_PYTHON
    if not Path(python).is_file():
        return None
    module = "smg" if flavor == "smg" else "sglang_router"
    found = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False, timeout=60)
    return python if found.returncode == 0 else None


@pytest.mark.parametrize("flavor", ["smg", "sglang-router"])
def test_the_recording_matches_the_installed_gateway(flavor: str) -> None:
    python = _installed(flavor)
    if python is None:
        pytest.skip(f"{flavor} is not installed (bash scripts/gateway/setup.sh installs sglang-router)")
    done = subprocess.run([sys.executable, str(RECORD), "--python", python, "--flavor", flavor, "--check"],
                          capture_output=True, text=True, check=False, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("flavor", ["smg", "sglang-router"])
def test_every_credential_looking_flag_is_classified(flavor: str) -> None:
    # A new recording with a new credential flag fails here until it is classified on purpose.
    dests = {f.dest for f in GATEWAYS[flavor].flags}  # type: ignore[index]
    unclassified = {d for d in dests if _CREDENTIAL_LIKE.search(d)} - SECRET_DESTS - NOT_SECRETS
    assert not unclassified
    assert {"api_key", "oracle_password", "postgres_db_url", "redis_url"} <= dests & SECRET_DESTS


HOSTILE = ["--policy", "cache_aware", "--api-k", "KEY-AAAA-1", "--oracle-pass=PASS-BBBB-2", "--tenant-api-key",
           "team:KEY-CCCC-3", "--redis-url", "redis://:PASS-DDDD-4@cache:6379", "--control-plane-api-keys",
           "k1:Svc:admin:KEY-EEEE-5", "--oracle-password", "PASS-FFFF-6"]


def test_credentials_are_masked_in_every_spelling_the_gateways_accept() -> None:
    shown = " ".join(display_gateway_argv(["/venv/bin/smg", "launch", "--host", "127.0.0.1", *HOSTILE]))
    for n, secret in enumerate(("KEY-AAAA-1", "PASS-BBBB-2", "KEY-CCCC-3", "PASS-DDDD-4", "KEY-EEEE-5",
                                "PASS-FFFF-6"), 1):
        assert secret not in shown, (n, shown)
    assert "--api-k *** --oracle-pass=*** --tenant-api-key ***" in shown
    assert "--policy cache_aware" in shown and "/venv/bin/smg launch --host 127.0.0.1" in shown


def test_the_keys_inside_credential_values_are_registered_too() -> None:
    secrets = gateway_secrets(HOSTILE)
    assert {"KEY-AAAA-1", "PASS-BBBB-2", "team:KEY-CCCC-3", "KEY-CCCC-3", "PASS-DDDD-4", "KEY-EEEE-5"} <= set(secrets)


def test_an_argv_the_gateway_would_refuse_is_still_masked() -> None:
    shown = display_gateway_argv(["--oracle-pas", "PASS-GGGG-7", "--policy", "bogus"])
    assert "PASS-GGGG-7" not in " ".join(shown)


def test_a_misspelt_gateway_flag_is_refused_naming_the_flag_meant() -> None:
    with pytest.raises(ConfigError) as info:
        check_gateway_flags(["--polcy", "cache_aware", "--api-key", "KEY-HHHH-8"])
    text = str(info.value)
    assert "--polcy is not a known flag, did you mean --policy?" in text
    assert "KEY-HHHH-8" not in text


def test_a_bad_choice_is_refused_and_a_newer_flag_is_a_warning() -> None:
    with pytest.raises(ConfigError, match="invalid choice: 'cache_awre'"):
        check_gateway_flags(["--policy", "cache_awre"])
    lines = check_gateway_flags(["--policy", "cache_aware", "--enable-brand-new-thing"])
    assert lines == ["--enable-brand-new-thing is not a flag of smg 1.13.0 (the recorded table): passed on "
                     "unchanged, for a newer gateway that has it"]


def test_a_flag_of_one_gateway_only_is_refused_once_that_gateway_is_the_installed_recorded_one() -> None:
    assert check_gateway_flags(["--tenant-api-key", "t:k"]) == []  # smg knows it
    assert check_gateway_flags(["--tenant-api-key", "t:k"], flavor="sglang-router", installed_version="0.4.0") != []
    with pytest.raises(ConfigError, match="not a flag of the installed gateway"):
        check_gateway_flags(["--tenant-api-key", "t:k"], flavor="sglang-router", installed_version="0.3.2")


@pytest.fixture(autouse=True)
def _forget_secrets() -> None:
    redaction.clear()


def test_values_are_read_in_every_spelling_the_gateway_accepts() -> None:
    assert gateway_values(["--api-k", "A", "--policy", "random", "--api-key=B"], "api_key") == ["A", "B"]
    assert gateway_values(["--policy", "bogus"], "policy") == []  # smg would refuse it: no reading
