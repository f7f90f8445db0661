"""Units of the lead's shared modules: settings resolution, SGLang args, hostmem, redaction, gate records."""

from __future__ import annotations

import pytest

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.plugin.settings import OPTIONS, Settings, resolve
from pytest_sglang.sglang import hostmem, masks
from pytest_sglang.sglang.args import human_readable_int, parse_launch_args


def test_precedence_cli_env_ini_default() -> None:
    ini = {"sglang_startup_timeout": "30", "sglang_validate": "off"}
    env = {"PYTEST_SGLANG_STARTUP_TIMEOUT": "20"}
    assert resolve({}, {}, {}).sglang_startup_timeout == 1800.0
    assert resolve({}, ini, {}).sglang_startup_timeout == 30.0
    assert resolve({}, ini, env).sglang_startup_timeout == 20.0
    settings = resolve({"sglang_startup_timeout": "10"}, ini, env)
    assert settings.sglang_startup_timeout == 10.0
    assert settings.sources["sglang_startup_timeout"] == "cli"
    assert settings.sglang_validate == "off"


def test_falsy_values_are_not_collapsed() -> None:
    settings = resolve({"sglang_host_memory_reserve_gb": "0"}, {"sglang_host_memory_reserve_gb": "10"}, {})
    assert settings.sglang_host_memory_reserve_gb == 0.0
    assert resolve({}, {"sglang_ipc_host": False}, {}).sglang_ipc_host is False


def test_api_key_env_alias() -> None:
    assert resolve({}, {}, {"SGLANG_API_KEY": "sk-abc123"}).sglang_api_key == "sk-abc123"


def test_bad_values_name_the_source() -> None:
    with pytest.raises(ConfigError, match=r"env PYTEST_SGLANG_VALIDATE='loud': must be one of strict, warn, off"):
        resolve({}, {}, {"PYTEST_SGLANG_VALIDATE": "loud"})
    with pytest.raises(ConfigError, match=r"ini option sglang_startup_timeout='soon'"):
        resolve({}, {"sglang_startup_timeout": "soon"}, {})
    with pytest.raises(ConfigError, match=r"--sglang-env='NOEQUALS': expected KEY=VALUE"):
        resolve({"sglang_env": ["NOEQUALS"]}, {}, {})


def test_one_name_per_setting() -> None:
    for option in OPTIONS:
        assert option.cli == "--" + option.name.replace("_", "-")
        assert option.env == "PYTEST_" + option.name.upper()
        assert option.name in Settings.__dataclass_fields__


def test_runner_shorthand() -> None:
    assert resolve({}, {}, {}).runner == "process"
    assert resolve({"sglang_simulate": True}, {}, {}).runner == "simulator"
    with pytest.raises(ConfigError, match="contradicts --sglang-simulate"):  # same level: neither wins
        resolve({"sglang_simulate": True, "sglang_runner": "docker"}, {}, {})


def test_launch_args_like_sglang() -> None:
    args = parse_launch_args(["--model-path", "m", "--tp", "8", "--enable-hicache", "--hicache-size", "48",
                              "--disable-cuda-graph", "--max-total-tokens", "64k", "--brand-new-flag", "1"])
    assert (args.tp_size, args.hicache_size, args.enable_hierarchical_cache) == (8, 48, True)
    assert args.max_total_tokens == 64_000
    assert args.passthrough == {"disable_cuda_graph": True}
    assert args.unknown == ("--brand-new-flag", "1")
    assert human_readable_int("1Mi") == 2**20
    with pytest.raises(ConfigError, match="ambiguous option: --pp could match"):
        parse_launch_args(["--pp", "2"])
    with pytest.raises(ConfigError, match="invalid int value: 'abc'"):
        parse_launch_args(["--tp", "abc"])
    with pytest.raises(ConfigError, match=r"invalid int value: '1.5'"):
        parse_launch_args(["--hicache-size", "1.5"])  # SGLang rejects decimals too


def test_seed_preflight_arithmetic() -> None:
    host = hostmem.HostMemory(available_bytes=418 * hostmem.GB, total_bytes=449 * hostmem.GB, source="simulated")
    kw = dict(enabled=True, hicache_ratio=None, tp_size=8, pp_size=1, dp_size=1, nnodes=1, host=host,
              reserve_bytes=10 * hostmem.GB)
    refused = hostmem.plan_hicache(hicache_size_gb=300, **kw)  # type: ignore[arg-type]
    assert refused.fits is False
    assert refused.explain() == ("--hicache-size 300 is GB per TP rank: 300 GB x 8 ranks = 2400 GB, "
                                 "but only 408 GB are available (reserve 10 GB)")
    assert hostmem.plan_hicache(hicache_size_gb=48, **kw).fits is True  # type: ignore[arg-type]


def test_sglang_host_pool_arithmetic() -> None:
    # reference §2.5: 120 GB per rank at 40,960 B/token, page 64 -> 2,929,728 tokens (incl. padding page)
    assert hostmem.host_pool_tokens(120 * hostmem.GB, 40_960, 64) == 2_929_728
    assert hostmem.ranks_per_node(8, 2, 2) == 32
    assert hostmem.sglang_ranks_per_host(8, 1) == 8
    assert hostmem.sglang_oom_message(300 * hostmem.GB, 51 * hostmem.GB).startswith(
        "Not enough host memory available. Requesting 300.00 GB but only have 51.00 GB free.")


def test_redaction_everywhere() -> None:
    redaction.clear()
    redaction.register("sk-live-0123456789")
    payload = {"api_key": "sk-live-0123456789", "admin_api_key": None,
               "launch_command": "--model-path m --api-key sk-live-0123456789",
               "internal_states": [{"api_key": "sk-live-0123456789", "note": "key sk-live-0123456789"}]}
    clean = masks.scrub_payload(payload)
    assert "sk-live-0123456789" not in repr(clean)
    assert clean["admin_api_key"] is None
    assert clean["launch_command"] == "--model-path m --api-key ***"
    assert masks.scrub_argv(["--api-key=abcdef", "--x"]) == ["--api-key=***", "--x"]
    redaction.clear()


def test_gate_records_round_trip_and_message() -> None:
    outcome = GateOutcome("capacity")
    outcome.add(compare("capacity", "max_total_num_tokens", 116_171, ">=", 231_120, unit="tokens",
                        source="/server_info max_total_num_tokens", remedy="raise --mem-fraction-static"))
    outcome.add(compare("capacity", "context_length", 131_072, ">=", 4096, unit="tokens"))
    assert not outcome.passed and [c.metric for c in outcome.failed] == ["max_total_num_tokens"]
    message = outcome.message()
    assert message.splitlines()[0] == ("sglang capacity gate failed: max_total_num_tokens 116,171 tokens "
                                       "(required >= 231,120)")
    assert "Fix: raise --mem-fraction-static" in message
    assert GateOutcome.from_dict(outcome.to_dict()).to_dict() == outcome.to_dict()
    with pytest.raises(AssertionError, match="capacity gate failed"):
        outcome.raise_for_failures()
    assert compare("x", "m", None, ">=", 1).passed is False
    assert Check.from_dict(outcome.checks[1].to_dict()).passed is True


def test_reserve_larger_than_host_is_said_plainly() -> None:
    host = hostmem.HostMemory(available_bytes=8 * hostmem.GB, total_bytes=16 * hostmem.GB, source="test")
    plan = hostmem.plan_hicache(enabled=True, hicache_size_gb=1, hicache_ratio=None, tp_size=1, pp_size=1,
                                dp_size=1, nnodes=1, host=host, reserve_bytes=10 * hostmem.GB)
    assert plan.fits is False
    assert plan.explain() == ("--hicache-size 1 is GB per TP rank: 1 GB x 1 rank = 1 GB, but the reserve (10 GB) "
                              "exceeds the 8 GB available, so nothing is left for host pools")


def test_ratio_sized_pool_is_rounded() -> None:
    host = hostmem.HostMemory(available_bytes=100 * hostmem.GB, total_bytes=None, source="test")
    plan = hostmem.plan_hicache(enabled=True, hicache_size_gb=0, hicache_ratio=2.0, tp_size=1, pp_size=1,
                                dp_size=1, nnodes=1, host=host, reserve_bytes=10 * hostmem.GB,
                                device_pool_bytes_per_rank=25_178_950_000)
    assert plan.explain() == ("the ratio-sized host pool is 50.4 GB per rank: 50.4 GB x 1 rank = 50.4 GB, "
                              "and 90 GB are available (reserve 10 GB)")
