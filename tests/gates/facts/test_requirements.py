"""Each marker's launch needs, declared once with its gate row, read from launch args and from /server_info."""

from __future__ import annotations

from typing import Any, cast

from pytest_sglang.gates.facts.requirements import active_needs, outcome_for, turn_off, unmet_in_launch, unmet_on_server
from pytest_sglang.gates.registry import GATES_BY_MARKER
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.sglang.args import parse_launch_args

PD = GATES_BY_MARKER["sglang_pd"]
FLEET = GATES_BY_MARKER["sglang_fleet"]


def _fields(needs: list[Any]) -> list[str]:
    return [n.field for n in needs]


def test_keywords_turn_needs_on_with_the_gates_defaults() -> None:
    assert _fields(active_needs(PD, {})) == ["enable_metrics"]  # load=True is the default
    assert _fields(active_needs(PD, {"load": False})) == []
    assert _fields(active_needs(PD, {"load": False, "kv_checksum": True})) == ["disaggregation_enable_kv_checksum"]
    assert _fields(active_needs(FLEET, {"max_imbalance": 0.0})) == ["enable_metrics"]  # 0.0 is set, not off
    assert active_needs(GATES_BY_MARKER["sglang_capacity"], {"min_total_tokens": 1}) == []


def test_how_to_turn_a_need_off_follows_the_keywords_default() -> None:
    metrics, checksum = PD.needs
    assert turn_off(PD, metrics) == "pass load=False"
    assert turn_off(PD, checksum) == "drop kv_checksum"


def test_a_pd_launch_is_read_per_role_in_any_spelling() -> None:
    needs = active_needs(PD, {"kv_checksum": True})
    # --disaggregation-enable-kv-check: an abbreviation SGLang accepts
    roles = {"prefill": parse_launch_args(["--enable-metrics", "--disaggregation-enable-kv-check"]),
             "decode": parse_launch_args(["--enable-metrics"])}
    unmet = unmet_in_launch(needs, roles)
    assert [(u.need.field, u.where) for u in unmet] == [("disaggregation_enable_kv_checksum",
                                                         "the decode launch args")]


def test_role_needs_do_not_apply_to_a_launch_without_those_roles() -> None:
    # sglang_pd on a single server fails with its own "needs a prefill-decode fleet" message instead.
    assert unmet_in_launch(active_needs(PD, {}), {"server": parse_launch_args([])}) == []


def test_speculative_needs_any_algorithm() -> None:
    needs = active_needs(GATES_BY_MARKER["sglang_speculative"], {})
    assert unmet_in_launch(needs, {"server": parse_launch_args(["--speculative-algorithm", "EAGLE"])}) == []
    assert len(unmet_in_launch(needs, {"server": parse_launch_args([])})) == 1


class _Attached:
    fleet = None

    def __init__(self, info: dict[str, Any]) -> None:
        self._info = info

    def describe(self) -> str:
        return "server X"

    def info(self) -> dict[str, Any]:
        return self._info

    # A lone server's side of the Handle protocol (server/members.py): it is its own one member.
    role, unreachable = "regular", None

    @property
    def server(self) -> _Attached:
        return self

    def label(self) -> None:
        return None

    def members(self) -> tuple[_Attached]:
        return (self,)


def test_an_attached_servers_info_is_judged_and_unknown_fields_are_not_refused() -> None:
    needs = active_needs(GATES_BY_MARKER["sglang_hicache"], {})
    off = cast(SGLangServer, _Attached({"enable_hierarchical_cache": False}))
    unmet = unmet_on_server(needs, off)
    assert [(u.found, u.where) for u in unmet] == [(False, "server X /server_info")]
    assert unmet_on_server(needs, cast(SGLangServer, _Attached({}))) == []
    outcome = outcome_for("sglang_hicache", unmet, "launch the server with {flag}")
    assert not outcome.passed
    assert outcome.checks[0].remedy == ("launch the server with --enable-hierarchical-cache: the hierarchical cache "
                                        "is what it judges")
