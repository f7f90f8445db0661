"""Schemas are valid, every recorded payload validates, broken variants fail at the right JSON path."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pytest_sglang.errors import SchemaMismatch
from pytest_sglang.server.validation import SCHEMA_NAMES, load_schema, validate_payload

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
CAPTURES = FIXTURES / "captures-0.5.23"


def _body(capture: Path) -> Any:
    return json.loads(capture.read_text().split("\n\n", 1)[1])


def _server_info_files() -> list[Path]:
    index = json.loads((FIXTURES / "server_info" / "index.json").read_text())
    return [FIXTURES / "server_info" / entry["file"] for entry in index["files"]]


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_is_valid_and_names_its_sglang_range(name: str) -> None:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert "0.5.23" in schema["$id"] and "0.4" in schema["$id"]


@pytest.mark.parametrize("path", _server_info_files(), ids=lambda p: p.name)
def test_recorded_server_info_validates(path: Path) -> None:
    validate_payload(json.loads(path.read_text()), "server_info", "/server_info")


def test_recorded_fixture_is_the_capture_body() -> None:
    recorded = json.loads((FIXTURES / "server_info" / "sglang-0.5.23.json").read_text())
    assert recorded == _body(CAPTURES / "basic" / "server_info.txt")


def test_old_layout_lacks_what_0_4_lacked() -> None:
    old = json.loads((FIXTURES / "server_info" / "sglang-0.4.x.json").read_text())
    assert not {"launch_command", "startup_time", "kv_events", "frontend"} & set(old)
    assert set(old["internal_states"][0]["memory_usage"]) == {
        "weight",
        "kvcache",
        "token_capacity",
        "cuda_graph",
    }


@pytest.mark.parametrize("capture", ["basic/server_info.txt", "basic/get_server_info.txt"])
def test_real_captures_validate(capture: str) -> None:
    validate_payload(_body(CAPTURES / capture), "server_info", "/server_info")


@pytest.mark.parametrize("capture", ["basic/model_info.txt", "headers/model_info.txt"])
def test_model_info_captures_validate(capture: str) -> None:
    validate_payload(_body(CAPTURES / capture), "model_info", "/model_info")


@pytest.mark.parametrize("path", sorted((FIXTURES / "health").glob("health-*.json")), ids=lambda p: p.name)
def test_health_records_validate(path: Path) -> None:
    validate_payload(json.loads(path.read_text()), "health", "/health")


def test_health_record_with_a_body_fails() -> None:
    with pytest.raises(SchemaMismatch) as info:
        validate_payload({"endpoint": "/health", "status_code": 200, "body": "ok"}, "health", "/health")
    assert "$.body" in str(info.value)


def _broken(mutate: Any) -> dict[str, Any]:
    payload = copy.deepcopy(json.loads((FIXTURES / "server_info" / "sglang-0.5.23.json").read_text()))
    mutate(payload)
    return payload


BROKEN = [
    (
        "missing max_total_num_tokens",
        lambda p: p.pop("max_total_num_tokens"),
        "$",
        "'max_total_num_tokens' is a required property",
    ),
    (
        "string max_total_num_tokens",
        lambda p: p.update(max_total_num_tokens="4096"),
        "$.max_total_num_tokens",
        "is not of type 'integer'",
    ),
    ("tp_size 0", lambda p: p.update(tp_size=0), "$.tp_size", "less than the minimum of 1"),
    (
        "token_capacity missing",
        lambda p: p["internal_states"][0]["memory_usage"].pop("token_capacity"),
        "$.internal_states[0].memory_usage",
        "'token_capacity' is a required property",
    ),
    (
        "token_capacity float",
        lambda p: p["internal_states"][0]["memory_usage"].update(token_capacity=1.5),
        "$.internal_states[0].memory_usage.token_capacity",
        "is not of type 'integer'",
    ),
    ("hicache_size string", lambda p: p.update(hicache_size="1"), "$.hicache_size", "is not of type"),
    ("internal_states object", lambda p: p.update(internal_states={}), "$.internal_states", "is not of type"),
    ("version number", lambda p: p.update(version=5), "$.version", "is not of type 'string'"),
]


@pytest.mark.parametrize(("case", "mutate", "path", "text"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_variant_fails_at_its_json_path(case: str, mutate: Any, path: str, text: str) -> None:
    with pytest.raises(SchemaMismatch) as info:
        validate_payload(_broken(mutate), "server_info", "/server_info")
    error = info.value
    assert error.endpoint == "/server_info"
    assert error.schema_id == load_schema("server_info")["$id"]
    assert any(e.startswith(f"{path}: ") and text in e for e in error.errors), error.errors
    assert text in error.headline
    message = str(error)
    assert message.splitlines()[0].startswith(f"/server_info does not match schema {error.schema_id}: ")
    assert "Fix: " in message.splitlines()[-1]


def test_message_never_dumps_the_document() -> None:
    with pytest.raises(SchemaMismatch) as info:
        validate_payload(_broken(lambda p: p.update(internal_states=p.copy())), "server_info", "/server_info")
    message = str(info.value)
    assert len(message) < 1500, message
    assert all(len(line) < 400 for line in message.splitlines())
    assert "(value: {" in message and '..."' not in message[:0]


def test_many_errors_are_capped() -> None:
    bad: dict[str, Any] = {k: "x" for k in load_schema("server_info")["properties"]}
    with pytest.raises(SchemaMismatch) as info:
        validate_payload(bad, "server_info", "/get_server_info")
    assert info.value.errors[-1].startswith("... and ") and info.value.errors[-1].endswith(" more errors")


def test_unknown_schema_name_is_explained() -> None:
    with pytest.raises(
        ValueError, match="unknown schema 'nope': expected one of health, model_info, server_info"
    ):
        load_schema("nope")


@pytest.mark.slow
def test_schemas_load_from_the_installed_wheel(tmp_path: Path) -> None:
    """The wheel force-includes schemas/; importlib.resources finds them there, not in the checkout."""
    dist, site = tmp_path / "dist", tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(dist.glob("pytest_sglang-*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import pytest_sglang, pytest_sglang.server.validation as v\n"
        "assert pytest_sglang.__file__.startswith(sys.argv[1]), pytest_sglang.__file__\n"
        "d = v.schema_dir(); assert str(d).startswith(sys.argv[1]), d\n"
        "print(sorted(v.load_schema(n)['$id'] for n in v.SCHEMA_NAMES))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(site)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "urn:pytest-sglang:schema:server_info" in out.stdout
