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
    from pytest_sglang.server.members import Handle
    from pytest_sglang.server.url import ServerURL


#: :attr:`LaunchNeed.expected` of a field that must merely be set (``--speculative-algorithm`` anything).
ANY_VALUE = "<any value>"


@dataclass(frozen=True)
class LaunchNeed:
    """A launch flag a marker needs on the servers it judges, declared with its gate (below).

    Checked before anything starts when the plugin launches (the launch args, as SGLang reads them) and
    before the gate's load when it attaches (each worker's ``/server_info``, which names the same field):
    without it the marker would run its load and only then fail, or check nothing.
    """

    field: str  # ServerArgs field (the /server_info key)
    flag: str  # what to add, e.g. "--enable-metrics"
    why: str  # what the marker reads that needs it
    when: str | None = None  # the marker keyword that turns the need on (set and not False); None: always
    expected: object = True  # True: the flag is on; ANY_VALUE: set to anything; else: that value
    #: The worker roles that need it (empty: every worker). A launch without those roles is left to the
    #: gate, whose own message ("needs a prefill-decode fleet") says more than a missing flag would.
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class MarkerGate:
    marker: str
    target: str  # "module:function"
    summary: str  # one sentence for --markers; the keywords come from the signature
    needs: tuple[LaunchNeed, ...] = ()
    #: Its loads are a performance measurement, compared with ``--sglang-baseline``. The loads of the
    #: other gates serve their own check (a probe's short load, a soak's hold): their noise is not a
    #: change of the server, so they are compared only on request (``@pytest.mark.sglang_baseline``).
    measures: bool = False

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


#: Where every marker is listed with a link to its keywords (the README shows one of each kind only).
DOCS_URL = "https://github.com/pytest-sglang/pytest-sglang/blob/main/docs/plugin.md#markers"

GATES: tuple[MarkerGate, ...] = (
    MarkerGate("sglang_capacity", "pytest_sglang.gates.facts.capacity:run_marker",
               "fail unless the server's KV capacity meets these floors (per DP rank)."),
    MarkerGate("sglang_hicache", "pytest_sglang.gates.facts.hicache:run_marker",
               "fail unless the hierarchical cache is configured (and, with effective=True, works).",
               needs=(LaunchNeed("enable_hierarchical_cache", "--enable-hierarchical-cache",
                                 "the hierarchical cache is what it judges", when="enabled"),)),
    MarkerGate("sglang_throughput", "pytest_sglang.gates.load.throughput:run_marker",
               "run a load and fail unless it meets these floors and ceilings.", measures=True),
    MarkerGate("sglang_slo", "pytest_sglang.gates.load.slo:run_marker",
               "find the highest concurrency at which the SLO holds and fail if it is below "
               "min_concurrency.", measures=True),
    MarkerGate("sglang_fleet", "pytest_sglang.gates.fleet.health:run_marker",
               "fail unless the workers behind the gateway are healthy, alike and evenly used (and, with "
               "cache_aware=True, route shared prefixes to one worker).",
               # cache_aware=True is judged by measuring the routing, not by the policy's name: smg's
               # prefix_hash and consistent_hashing keep a prefix on one worker too.
               needs=(LaunchNeed("enable_metrics", "--enable-metrics", "max_imbalance counts the requests each "
                                 "worker served in its /metrics", when="max_imbalance"),)),
    MarkerGate("sglang_accuracy", "pytest_sglang.gates.correctness.accuracy:run_marker",
               "run an accuracy task and fail when the score's confidence interval lies below min_score "
               "(or a baseline's)."),
    MarkerGate("sglang_golden", "pytest_sglang.gates.correctness.golden:run_marker",
               "fail unless the server's greedy tokens and logprobs match the recording at path."),
    MarkerGate("sglang_failover", "pytest_sglang.gates.fleet.failover:run_marker",
               "kill a worker of a launched fleet under load and fail on client errors, slow detection "
               "or slow recovery beyond these limits."),
    MarkerGate("sglang_pd", "pytest_sglang.gates.fleet.pd:run_marker",
               "fail unless a prefill-decode fleet's workers are the roles the gateway gives them, move their KV "
               "under load without failures and (with parity=True) answer like a single server.",
               needs=(LaunchNeed("enable_metrics", "--enable-metrics", "the KV transfer under load (load=True, the "
                                 "default) is read from each prefill and decode worker's /metrics", when="load",
                                 roles=("prefill", "decode")),
                      LaunchNeed("disaggregation_enable_kv_checksum", "--disaggregation-enable-kv-checksum",
                                 "kv_checksum=True checks that every worker computes the KV checksum",
                                 when="kv_checksum", roles=("prefill", "decode")))),
    MarkerGate("sglang_speculative", "pytest_sglang.gates.production.speculative:run_marker",
               "fail unless speculative decoding accepts enough draft tokens (per request and in the server's "
               "metrics) and beats the same model without speculation by min_speedup.",
               needs=(LaunchNeed("speculative_algorithm", "--speculative-algorithm",
                                 "speculative decoding is what it judges", expected=ANY_VALUE),)),
    MarkerGate("sglang_probes", "pytest_sglang.gates.production.probes:run_marker",
               "run a load while probing like Kubernetes (readiness and liveness) and fail when the pod would have "
               "been marked unready or restarted, or a DP rank answers nothing while /health is 200."),
    MarkerGate("sglang_soak", "pytest_sglang.gates.production.soak:run_marker",
               "hold a load for duration_s while sampling the server, and fail when its RSS or lost free KV grows "
               "beyond a limit (the whole 95% interval of the slope) or it completes nothing for max_stall_s.",
               needs=(LaunchNeed("enable_metrics", "--enable-metrics", "max_kv_free_drift reads the free KV tokens "
                                 "from /metrics", when="max_kv_free_drift"),)),
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

    server: Handle
    load: LoadFn
    factory: Callable[..., SGLangServer] | None = None
    nodeid: str = ""
    eval_data: str | None = None
    write: Callable[[str], None] | None = None
    request_timeout_s: float | None = None
    load_timeout_s: float | None = None
    #: ``--sglang-pd-reference-url``: the single server a prefill-decode fleet is compared with.
    pd_reference_url: ServerURL | None = None
