"""Attach to a fleet the test starts itself: two simulators on different models behind SGLang's gateway.

The workers differ in ``--model-path`` and in their KV pool (``--max-total-tokens`` 8,192 and 4,096), so
the consistency check must fail with a per-field diff and the capacity floor must name the smaller worker.
Workers are listed by URL, so which index holds which model depends on the ports: patterns allow both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.fleetkit import ROUTER, ROUTER_PYTHON, OwnFleet, own_fleet

MIXED = (("--model-path", "sim/tiny-llama", "--max-total-tokens", "8192"),
         ("--model-path", "sim/other-llama", "--max-total-tokens", "4096"))
MODELS = ("sim/tiny-llama", "sim/other-llama")


@pytest.fixture(scope="module")
def smg_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnFleet]:
    """Two workers on different models behind ``smg launch`` (stopped when the module is done)."""
    with own_fleet(MIXED, tmp_path_factory.mktemp("smg-fleet")) as fleet:
        yield fleet


INNER = """
import pytest


@pytest.mark.sglang_fleet()
def test_consistent():
    pass


@pytest.mark.sglang_fleet(ignore=["model_path", "served_model_name", "tokenizer_path", "weights_checksum",
                                  "max_total_tokens"])
def test_consistent_ignoring_what_differs(sglang_gate):
    assert sglang_gate["fleet"].checks[1].measured == "none"


@pytest.mark.sglang_capacity(min_total_tokens=6000, min_fleet_total_tokens=12288)
def test_capacity():
    pass
"""


def _diff_table(models: tuple[str, str]) -> list[str]:
    return [
        "  5 field(s) differ between the workers (only those are shown):",
        "    field             | worker 0 (http://127.0.0.1:*) | worker 1 (http://127.0.0.1:*)",
        f"    model_path        | {models[0]:<14}* | {models[1]}",
        f"    served_model_name | {models[0]:<14}* | {models[1]}",
        f"    tokenizer_path    | {models[0]:<14}* | {models[1]}",
        "    weights_checksum  | * | *",
        "    max_total_tokens  | *",
    ]


def _check_consistency_failure(result: pytest.RunResult, gateway: str) -> None:
    result.stdout.fnmatch_lines([
        "sglang fleet gate failed: differing_fields model_path, served_model_name, tokenizer_path, weights_checksum, "
        "max_total_tokens (required == none)",
        "  healthy_workers: measured 2 workers, required >= 2 workers *: ok",
        "  differing_fields: measured model_path, served_model_name, tokenizer_path, weights_checksum, "
        "max_total_tokens, required == none [[]each worker's own /server_info: 51 launch fields compared[]]: FAILED",
        # each worker is registered as the model it serves, though the two differ
        "  registration_mismatches: measured none, required == none [[]gateway GET /workers (model_id, worker_type, "
        "labels/metadata) against each worker's own /server_info: 2 worker(s)[]]: ok",
        f"  gateway: gateway={gateway} workers=2; GET /readiness -> 200 (2/2 workers healthy)",
        "  worker 0 (http://127.0.0.1:*): gateway says healthy, own /health 200",
        "  worker 1 (http://127.0.0.1:*): gateway says healthy, own /health 200",
    ], consecutive=True)
    lines = result.stdout.lines
    first = next(i for i, line in enumerate(lines) if line.startswith("    model_path "))
    order = MODELS if MODELS[0] in lines[first].split("|")[1] else MODELS[::-1]
    result.stdout.fnmatch_lines([*_diff_table(order),
                                 "Fix: launch every worker with the same SGLang version, model and launch arguments "
                                 "(or ignore=[[]...[]] a field that may differ on purpose)"], consecutive=True)


def test_a_worker_on_another_model_fails_consistency_with_the_diff(pytester: pytest.Pytester,
                                                                    smg_fleet: OwnFleet) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("--sglang-url", smg_fleet.url, "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1, failed=2)
    _check_consistency_failure(result, "smg 1.13.0")
    # The capacity floor names the worker below it, with its figure; the sum covers both pools.
    result.stdout.fnmatch_lines([
        "sglang capacity gate failed: min_total_tokens=6000: measured 4,096 tokens (max_total_num_tokens of worker "
        "? (http://127.0.0.1:*))",
    ])
    result.stdout.fnmatch_lines([
        "  min_total_tokens=6000: max_total_num_tokens of worker ? (http://127.0.0.1:*) measured 4,096 tokens, "
        "required >= 6,000 tokens [[]*[]]: FAILED",
    ])
    result.stdout.fnmatch_lines([
        "  min_fleet_total_tokens=12288: fleet_total_tokens measured 12,288 tokens, required >= 12,288 tokens [[]sum "
        "over the 2 workers *[]]: ok",
    ])
    # Each worker's server args differ (its own pool), so each gets its own context line.
    result.stdout.fnmatch_lines(["  server args (worker 0 (http://127.0.0.1:*)): *",
                                 "  server args (worker 1 (http://127.0.0.1:*)): *"], consecutive=True)


OFF = """
import pytest


@pytest.mark.sglang_capacity(min_total_tokens=1000, min_context_length=8192)
def test_capacity_unreachable():
    pass


@pytest.mark.sglang_fleet(max_imbalance=1, requests=4)
def test_fleet_unreachable():
    pass
"""


def test_unreachable_workers_are_judged_by_the_gateway_or_not_checked(pytester: pytest.Pytester,
                                                                       smg_fleet: OwnFleet) -> None:
    pytester.makepyfile(test_inner=OFF)
    result = pytester.runpytest_subprocess("--sglang-url", smg_fleet.url, "--sglang-fleet-direct", "off",
                                           "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(failed=2)
    # No figure a worker alone reports passes unread; the context length comes from smg's labels.
    result.stdout.fnmatch_lines([
        "  min_total_tokens=1000: max_total_num_tokens of worker 0 (http://127.0.0.1:*) measured not checked, "
        "required >= 1,000 [[]not checked: direct probing off (--sglang-fleet-direct off); the gateway does not "
        "report max_total_num_tokens (only the worker's /server_info does)[]]: FAILED",
        "  min_context_length=8192: context_length of worker 0 (http://127.0.0.1:*) measured 8,192 tokens, required "
        ">= 8,192 tokens [[]the gateway's /workers labels.max_model_len *[]]: ok",
    ], consecutive=True)
    # Consistency falls back to the gateway's listing (smg lists the models and the pool cap); shares cannot be read.
    result.stdout.fnmatch_lines([
        "sglang fleet gate failed: differing_fields model_path, served_model_name, tokenizer_path, max_total_tokens "
        "(required == none); max_imbalance=1: measured None (request_imbalance)",
    ])
    result.stdout.fnmatch_lines([
        "  differing_fields: measured *, required == none [[]each worker's own /server_info (the gateway's listing "
        "for 2 not read directly): 51 launch fields compared[]]: FAILED",
        "  registration_mismatches: measured none, required == none [[]*: 2 worker(s)[]]: ok",
        "  max_imbalance=1: request_imbalance measured None, required <= 1 [[]* shares: unknown (see 'worker "
        "shares' below)[]]: FAILED",
    ], consecutive=True)
    result.stdout.fnmatch_lines([
        "  worker 0 (http://127.0.0.1:*): gateway says healthy, own /health not probed (direct probing off *)",
    ])
    result.stdout.fnmatch_lines([
        "  worker 0 (http://127.0.0.1:*): direct probing off (--sglang-fleet-direct off); compared on the gateway's "
        "listing only (dp_size, *model_path, pp_size, served_model_name, tokenizer_path, tp_size, version*); "
        "* field(s) not checked",
    ])


@pytest.fixture(scope="module")
def router_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnFleet]:
    """The same two workers behind sglang-router 0.3.2 (a venv of its own: ``SGLANG_ROUTER_PYTHON``)."""
    if not Path(ROUTER_PYTHON).is_file() or not os.access(ROUTER_PYTHON, os.X_OK):
        pytest.skip(f"needs sglang-router 0.3.2: set SGLANG_ROUTER_PYTHON (now {ROUTER_PYTHON}) to the Python of "
                    "a venv where `pip install sglang-router==0.3.2` ran")
    with own_fleet(MIXED, tmp_path_factory.mktemp("router-fleet"), gateway=ROUTER) as fleet:
        yield fleet


def test_consistency_against_sglang_router_0_3_2(pytester: pytest.Pytester, router_fleet: OwnFleet) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("--sglang-url", router_fleet.url, "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1, failed=2)
    _check_consistency_failure(result, "sglang-router")
