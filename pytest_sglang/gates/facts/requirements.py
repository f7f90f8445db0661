"""What each marker needs from the launch (:class:`~pytest_sglang.gates.registry.LaunchNeed`), checked early.

Before: ``sglang_pd`` against workers launched without ``--enable-metrics`` started the whole fleet,
ran its load and only then failed "metrics are disabled". The needs are declared once, with the gate
rows in :mod:`pytest_sglang.gates.registry`, and read two ways:

* :func:`unmet_in_launch`: from the launch args of every worker role, as SGLang will read them
  (before anything starts);
* :func:`unmet_on_server`: from each reachable worker's ``/server_info`` of an attached server (before
  the gate's load). A field ``/server_info`` does not show cannot be judged and is not refused.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_sglang.gates.base import Check, GateOutcome
from pytest_sglang.gates.registry import ANY_VALUE, LaunchNeed, MarkerGate

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle
    from pytest_sglang.sglang.args import LaunchArgs

__all__ = ["Unmet", "active_needs", "outcome_for", "turn_off", "unmet_in_launch", "unmet_on_server"]


@dataclass(frozen=True)
class Unmet:
    """A need the launch does not meet: the value found and where it was read."""

    need: LaunchNeed
    found: object
    where: str


def _defaults(gate: MarkerGate) -> dict[str, object]:
    parameters = inspect.signature(gate.load()).parameters
    return {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}


def active_needs(gate: MarkerGate, kwargs: Mapping[str, object]) -> list[LaunchNeed]:
    """The needs of ``gate`` that its marker's keywords (defaults applied) turn on."""
    if not gate.needs:
        return []
    values = {**_defaults(gate), **kwargs}
    # ``is``, not ``in``: max_imbalance=0.0 is set (0.0 == False would drop it).
    return [n for n in gate.needs if n.when is None or (values.get(n.when) is not None
                                                         and values.get(n.when) is not False)]


def turn_off(gate: MarkerGate, need: LaunchNeed) -> str:
    """How the marker's keywords drop ``need``: ``pass load=False``, ``drop max_imbalance`` ("" if they cannot)."""
    if need.when is None:
        return ""
    return f"pass {need.when}=False" if _defaults(gate).get(need.when) is True else f"drop {need.when}"


def _met(value: object, need: LaunchNeed) -> bool:
    if need.expected is ANY_VALUE:
        return value not in (None, "", False)
    if need.expected is True:
        return bool(value)
    return value == need.expected


def unmet_in_launch(needs: Sequence[LaunchNeed], roles: Mapping[str, LaunchArgs]) -> list[Unmet]:
    """The needs the launch does not meet: ``roles`` maps each worker role to its launch args."""
    out: list[Unmet] = []
    for need in needs:
        missing = [role for role, args in roles.items() if (not need.roles or role in need.roles)
                   and not _met(args.value(need.field), need)]
        if missing:
            out.append(Unmet(need, roles[missing[0]].value(need.field), f"the {' and '.join(missing)} launch args"))
    return out


def unmet_on_server(needs: Sequence[LaunchNeed], server: Handle) -> list[Unmet]:
    """The needs an attached server (each reachable worker of a gateway) does not meet, from ``/server_info``."""
    # Behind a gateway only the workers can say; none reachable (--sglang-fleet-direct off, or a gateway
    # on another network): nothing to read here, and the gate says what it could not check.
    infos = [(member.role, f"{member.label() or server.describe()} /server_info", member.server.info())
             for member in server.members() if member.server is not None]
    return [Unmet(need, info[need.field], where) for need in needs for role, where, info in infos
            if (not need.roles or role in need.roles) and need.field in info and not _met(info[need.field], need)]


def outcome_for(marker: str, unmet: Sequence[Unmet], fix: str) -> GateOutcome:
    """A failed outcome naming each missing flag (the gate itself is not run: it would check nothing)."""
    out = GateOutcome(marker.removeprefix("sglang_"))
    for item in unmet:
        need = item.need
        required = "set" if need.expected is ANY_VALUE else need.expected
        out.add(Check(gate=out.gate, metric=need.field, measured=_shown(item.found), required=_shown(required),
                      op="==", source=item.where, passed=False, keyword=need.when or "",
                      remedy=f"{fix.format(flag=need.flag)}: {need.why}"))
    return out


def _shown(value: object) -> str | float | bool | None:
    return value if isinstance(value, (str, float, bool)) or value is None else str(value)
