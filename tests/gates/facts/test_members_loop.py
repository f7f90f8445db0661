"""capacity and hicache judge each member of ANY handle (issue 31): no "is it a fleet?" branch.

A handle that is neither an SGLangServer nor an SGLangFleet but tells two members gets one named record
per member, as a fleet does; before, such a handle was judged as one server on its own ``/server_info``.
Their public signatures carry no ``Any`` (assert_hicache takes named keywords).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.gates import base
from pytest_sglang.gates.facts import capacity, hicache, workers
from pytest_sglang.gates.load import throughput
from pytest_sglang.report import fleet as fleet_report

CAPTURE = Path(__file__).parents[3] / "fixtures" / "captures-0.5.23" / "basic" / "server_info.txt"


def _info(tokens: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CAPTURE.read_text().split("\n\n", 1)[1])
    data["max_total_num_tokens"] = tokens
    for state in data.get("internal_states") or []:
        state["memory_usage"]["token_capacity"] = tokens
    return data


@dataclass
class FakeServer:
    """What a member's ``server`` answers: its own /server_info (no /v1/models: the figure is optional)."""

    data: dict[str, Any]
    startup: None = None

    def info(self) -> dict[str, Any]:
        return self.data

    def metrics(self) -> dict[str, Any]:
        return {}

    def client(self, **kwargs: Any) -> Any:
        raise OSError("no /v1/models here")


@dataclass
class FakeMember:
    name: str
    server: FakeServer
    unreachable: None = None
    role: str = "regular"

    def label(self) -> str:
        return self.name

    def metrics_or_why(self, timeout_s: float | None = None) -> str:
        return "not read"

    def fact(self, name: str) -> None:
        return None


@dataclass
class TwoServers:
    """A handle of two members (not a fleet class): its own /server_info is the first member's."""

    members_: list[FakeMember] = field(default_factory=list)
    url: str = "http://handle.invalid"

    def members(self) -> list[FakeMember]:
        return self.members_

    def info(self) -> dict[str, Any]:
        return self.members_[0].server.info()


def _handle() -> TwoServers:
    return TwoServers([FakeMember("member A", FakeServer(_info(8192))),
                       FakeMember("member B", FakeServer(_info(4096)))])


def test_capacity_judges_each_member_of_any_handle() -> None:
    outcome = capacity.evaluate_fleet_capacity(_handle(), min_total_tokens=6000)  # type: ignore[arg-type]
    by_metric = {c.metric: c.passed for c in outcome.checks}
    assert by_metric == {"max_total_num_tokens of member A": True, "max_total_num_tokens of member B": False}
    with pytest.raises(AssertionError, match="max_total_num_tokens of member B"):
        capacity.assert_capacity(_handle(), min_total_tokens=6000)  # type: ignore[arg-type]


def test_fleet_total_is_the_sum_over_members() -> None:
    outcome = capacity.evaluate_fleet_capacity(_handle(), min_fleet_total_tokens=12288)  # type: ignore[arg-type]
    total = next(c for c in outcome.checks if c.metric == "fleet_total_tokens")
    assert (total.measured, total.passed) == (12288, True)
    assert "member A 8,192 + member B 4,096" in total.source


def test_hicache_judges_each_member_of_any_handle() -> None:
    outcome = hicache.evaluate_fleet_hicache(_handle(), enabled=False)  # type: ignore[arg-type]
    assert {c.metric for c in outcome.checks} == {"enable_hierarchical_cache of member A",
                                                   "enable_hierarchical_cache of member B"}


@pytest.mark.parametrize("fn", [capacity.assert_capacity, capacity.evaluate_fleet_capacity, hicache.assert_hicache,
                                hicache.evaluate_fleet_hicache, base.compare, throughput.assert_throughput,
                                workers.not_checked, fleet_report.identify_fleet, fleet_report.refresh_health,
                                fleet_report.fleet_section, fleet_report.rows, fleet_report.gateway_line])
def test_no_any_and_no_var_keywords_in_public_signatures(fn: Any) -> None:
    signature = inspect.signature(fn)
    assert all(p.kind is not p.VAR_KEYWORD for p in signature.parameters.values()), signature
    texts = [str(p.annotation) for p in signature.parameters.values()] + [str(signature.return_annotation)]
    assert not [t for t in texts if "Any" in t.replace("AnyOf", "")], signature
