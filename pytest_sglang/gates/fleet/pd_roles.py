"""What each worker of a prefill-decode fleet says about itself, against what the gateway thinks it is.

SGLang's gateway in PD mode pairs whatever it is given (``--prefill URL [BOOTSTRAP_PORT] --decode
URL``): measured on smg 1.13 and sglang-router 0.3.2, two workers whose ``/server_info`` says
``disaggregation_mode: "null"`` are accepted as a pair without a word, and a bootstrap port that is not
the prefill worker's own sends every decode worker to the wrong address. So each listed worker is read
on its own ``/server_info`` (SGLang 0.5.23's ServerArgs fields ``disaggregation_mode``,
``disaggregation_transfer_backend``, ``disaggregation_bootstrap_port``,
``disaggregation_enable_kv_checksum``); a worker this machine cannot reach is judged from the gateway's
``metadata`` where sglang-router 0.3.x reports ``disaggregation_mode``, else it gets a failing "not
checked" record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_sglang.errors import SGLangError
from pytest_sglang.formatting import Value
from pytest_sglang.gates.base import Check, compare
from pytest_sglang.gates.facts.workers import NOT_CHECKED

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle

__all__ = ["PD_ROLES", "WorkerFacts", "backend_checks", "bootstrap_checks", "checksum_checks",
           "pd_workers", "read_facts", "role_checks"]

GATE = "pd"
PD_ROLES = ("prefill", "decode")
_INFO = "its own GET /server_info"
_ROLE_FIX = ("launch each prefill worker with --disaggregation-mode prefill and each decode worker with "
             "--disaggregation-mode decode, and list them to the gateway in the same roles (--prefill URL "
             "BOOTSTRAP_PORT / --decode URL): the gateway pairs whatever it is given")
_UNREACHABLE_FIX = ("run the tests where the workers' addresses are reachable (--sglang-fleet-direct require "
                    "makes an unreachable worker an error at start)")


def pd_workers(fleet: SGLangFleet) -> list[WorkerHandle]:
    """The workers the gateway lists as prefill or decode."""
    return [w for w in fleet.workers if w.role in PD_ROLES]


class WorkerFacts:
    """One worker's ``/server_info`` read once (or why it could not be), shared by every check."""

    def __init__(self, worker: WorkerHandle) -> None:
        """Read the worker's own ``/server_info`` when it is reachable."""
        self.worker = worker
        self.info: dict[str, Any] | None = None
        self.why = worker.unreachable or "not reachable from here"
        if worker.reachable:
            try:
                self.info = worker.info()
            except SGLangError as exc:
                self.why = f"GET /server_info failed: {str(exc).splitlines()[0]}"

    def field(self, name: str) -> tuple[Value, str] | None:
        """``(value, where it came from)``, or None when neither the worker nor the gateway says."""
        if self.info is not None:
            return _value(self.info.get(name)), f"{_INFO} {name}"
        fact = self.worker.entry.fact(name)
        if fact is not None:  # sglang-router 0.3.x keeps the worker's server_info fields in its metadata
            return _text(fact), f"the gateway's GET /workers metadata.{name} ({self.why})"
        return None

    def not_checked(self, metric: str, required: Value, op: str = "==") -> Check:
        """A failing record: the figure could not be read anywhere."""
        return Check(gate=GATE, metric=f"{metric} of {self.worker.name()}", measured=NOT_CHECKED, required=required,
                     op=op, passed=False, remedy=_UNREACHABLE_FIX,
                     source=f"not checked: {self.why}; the gateway does not report {metric}")


def read_facts(fleet: SGLangFleet) -> list[WorkerFacts]:
    """Every listed worker's facts, in the gateway's order."""
    return [WorkerFacts(w) for w in fleet.workers]


def _value(value: object) -> Value:
    """A ``/server_info`` field as a check's figure (a list or object is shown as its text)."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else repr(value)


def _text(value: str) -> Value:
    """A gateway metadata field (always text: ``"True"``, ``"8998"``) as the worker's JSON would have it."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return int(value) if value.isdigit() else value


def _per_worker(facts: list[WorkerFacts], field: str, required: Callable[[WorkerHandle], Value], *,
                remedy: str, keyword: str = "", also: str = "") -> list[Check]:
    checks = []
    for fact in facts:
        want = required(fact.worker)
        found = fact.field(field)
        if found is None:
            checks.append(fact.not_checked(field, want))
            continue
        value, source = found
        checks.append(compare(GATE, f"{field} of {fact.worker.name()}", value, "==", want,
                              source=source + also.format(role=fact.worker.role), remedy=remedy, keyword=keyword))
    return checks


def role_checks(facts: list[WorkerFacts]) -> list[Check]:
    """Each worker's own ``disaggregation_mode`` is the role the gateway gave it (``null`` for a regular one)."""
    # The source also says what the gateway believes: that is the other half of the comparison.
    return _per_worker(facts, "disaggregation_mode", lambda w: "null" if w.role == "regular" else w.role,
                       remedy=_ROLE_FIX, also="; the gateway lists it as {role}")


def bootstrap_checks(facts: list[WorkerFacts]) -> list[Check]:
    """A prefill worker's own bootstrap port is the one the gateway sends decode workers to."""
    checks = []
    for fact in facts:
        listed = fact.worker.entry.bootstrap_port
        if fact.worker.role != "prefill" or listed is None:
            continue  # the gateway then sends its default (SGLang's 8998); the transfer figures show the rest
        found = fact.field("disaggregation_bootstrap_port")
        if found is None:
            checks.append(fact.not_checked("disaggregation_bootstrap_port", listed))
            continue
        value, source = found
        checks.append(compare(  # ports as text: never shown with a thousands separator
            GATE, f"disaggregation_bootstrap_port of {fact.worker.name()}", str(value), "==", str(listed),
            source=f"{source}; required: the bootstrap port the gateway's GET /workers lists for it (sent to the "
                   "decode workers as bootstrap_port)",
            remedy="give the gateway each prefill worker's own --disaggregation-bootstrap-port after its URL "
                   "(--prefill URL PORT)"))
    return checks


def backend_checks(facts: list[WorkerFacts], backend: str) -> list[Check]:
    """Every prefill and decode worker runs the required KV transfer backend."""
    return _per_worker([f for f in facts if f.worker.role in PD_ROLES], "disaggregation_transfer_backend",
                       lambda w: backend, keyword="transfer_backend",
                       remedy=f"launch every prefill and decode worker with --disaggregation-transfer-backend "
                              f"{backend} (SGLang's default is mooncake)")


def checksum_checks(facts: list[WorkerFacts]) -> list[Check]:
    """Every prefill and decode worker computes (prefill) and verifies (decode) the KV checksum."""
    return _per_worker([f for f in facts if f.worker.role in PD_ROLES], "disaggregation_enable_kv_checksum",
                       lambda w: True, keyword="kv_checksum",
                       remedy="launch every prefill and decode worker with --disaggregation-enable-kv-checksum "
                              "(a mismatch then aborts the request on the decode side instead of answering "
                              "from corrupt KV)")
