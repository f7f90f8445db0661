"""The marker gates: one row per marker, resolved lazily so that importing the plugin stays cheap.

Each gate module exposes ``run_marker(ctx: GateContext, *, ...) -> GateOutcome`` whose keyword-only
parameters ARE the marker's keywords, with their types, defaults and constraints
(:mod:`pytest_sglang.gates.keywords`): the plugin generates the ``--markers`` line from that signature,
validates marker kwargs against it at collection (a typo or a bad value is a usage error naming the
marker and the keyword) and evaluates the marker by calling it. ``assert_*`` helpers build the same
outcome, so both give the same message.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # types only: importing the plugin must not import the engine or the load generator
    from pytest_sglang.gates.base import GateOutcome
    from pytest_sglang.loadgen import LoadResult, LoadSpec
    from pytest_sglang.server.handle import SGLangServer
    from pytest_sglang.server.url import ServerURL


@dataclass(frozen=True)
class MarkerGate:
    marker: str
    target: str  # "module:function"
    summary: str  # one sentence for --markers; the keywords come from the signature

    def load(self) -> Callable[..., GateOutcome]:
        module, _, name = self.target.partition(":")
        fn: Callable[..., GateOutcome] = getattr(importlib.import_module(module), name)
        return fn

    def doc(self) -> str:
        """The ``--markers`` line: the marker's keywords exactly as its signature declares them.

        Imports the gate module (the load generator, for load gates): only for ``pytest --markers``.
        """
        from pytest_sglang.gates.keywords import signature_text

        return f"{self.marker}{signature_text(self.load())}: {self.summary} See {DOCS_URL}"

    def brief(self) -> str:
        """A cheap line that registers the marker name (for ``--strict-markers``) without imports."""
        return f"{self.marker}: {self.summary} See {DOCS_URL}"


DOCS_URL = "https://github.com/pytest-sglang/pytest-sglang#markers"

GATES: tuple[MarkerGate, ...] = (
    MarkerGate("sglang_capacity", "pytest_sglang.gates.capacity:run_marker",
               "fail unless the server's KV capacity meets these floors (per DP rank)."),
    MarkerGate("sglang_hicache", "pytest_sglang.gates.hicache:run_marker",
               "fail unless the hierarchical cache is configured (and, with effective=True, works)."),
    MarkerGate("sglang_throughput", "pytest_sglang.gates.throughput:run_marker",
               "run a load and fail unless it meets these floors and ceilings."),
    MarkerGate("sglang_slo", "pytest_sglang.gates.slo:run_marker",
               "find the highest concurrency at which the SLO holds and fail if it is below "
               "min_concurrency."),
    MarkerGate("sglang_fleet", "pytest_sglang.gates.fleet:run_marker",
               "fail unless the workers behind the gateway are healthy, alike and evenly used (and, with "
               "cache_aware=True, route shared prefixes to one worker)."),
    MarkerGate("sglang_accuracy", "pytest_sglang.gates.accuracy:run_marker",
               "run an accuracy task and fail when the score's confidence interval lies below min_score "
               "(or a baseline's)."),
    MarkerGate("sglang_golden", "pytest_sglang.gates.golden:run_marker",
               "fail unless the server's greedy tokens and logprobs match the recording at path."),
    MarkerGate("sglang_failover", "pytest_sglang.gates.failover:run_marker",
               "kill a worker of a launched fleet under load and fail on client errors, slow detection "
               "or slow recovery beyond these limits."),
    MarkerGate("sglang_pd", "pytest_sglang.gates.pd:run_marker",
               "fail unless a prefill-decode fleet's workers are the roles the gateway gives them, move their KV "
               "under load without failures and (with parity=True) answer like a single server."),
)

GATES_BY_MARKER = {g.marker: g for g in GATES}


class LoadFn(Protocol):
    """Runs one load: ``load(spec) -> LoadResult``."""

    def __call__(self, spec: LoadSpec, /) -> LoadResult: ...


@runtime_checkable
class LockingLoad(LoadFn, Protocol):
    """A load function that also offers the run-wide load lock (the plugin's ``sglang_load``)."""

    def lock(self) -> AbstractContextManager[None]: ...


@dataclass
class GateContext:
    """What a marker gate may use. Built by the plugin for each marked test.

    ``load(spec)`` runs a :class:`pytest_sglang.loadgen.LoadSpec` against ``server`` holding the
    run-wide load lock (load tests never overlap, also under xdist) and records the result for the
    reports; the plugin's also offers ``lock()`` (:class:`LockingLoad`) for traffic a gate sends
    itself. ``factory`` is the session's ``sglang_server_factory`` (A/B launches) or None.
    ``eval_data`` is the run's ``--sglang-eval-data``; ``write`` shows a line on the terminal while the
    gate runs (None with ``-q`` or outside pytest); ``request_timeout_s``/``load_timeout_s`` are the run's
    ``--sglang-request-timeout``/``--sglang-load-timeout`` for loads a gate runs itself.
    """

    server: SGLangServer
    load: LoadFn
    factory: Callable[..., SGLangServer] | None = None
    nodeid: str = ""
    eval_data: str | None = None
    write: Callable[[str], None] | None = None
    request_timeout_s: float | None = None
    load_timeout_s: float | None = None
    #: ``--sglang-pd-reference-url``: the single server a prefill-decode fleet is compared with.
    pd_reference_url: ServerURL | None = None
