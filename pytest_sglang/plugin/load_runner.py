"""The ``sglang_load`` runtime: run a load against a server under the run-wide lock and record it."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

import pytest

from pytest_sglang.plugin.results import results_of
from pytest_sglang.sglang import masks

if TYPE_CHECKING:
    from pytest_sglang.loadgen import LoadResult, LoadSpec
    from pytest_sglang.server.members import Handle

__all__ = ["LoadRunner", "load_runner", "run_lock"]


@contextlib.contextmanager
def run_lock(path: str) -> Iterator[None]:
    """The run-wide load lock: load-generating tests never overlap, also across xdist workers."""
    # filelock, imported here: portable (fcntl on POSIX, msvcrt on Windows) and off the import path.
    from filelock import FileLock

    with FileLock(path):
        yield


class LoadRunner:
    """What the ``sglang_load`` fixture returns: runs a load, holding the run-wide lock, and records it.

    ``sglang_load(spec=None, *, server=None, **LoadSpec fields) -> LoadResult``. ``records``: keep
    the per-request records in the stored result (``--sglang-report-requests`` and
    ``--sglang-html`` need them; they are large, so only then). ``lock()`` is the run-wide load lock,
    public for gates and tests that drive their own traffic (e.g. the hicache workload).
    """

    def __init__(self, server: Handle, lock_path: str, item: pytest.Item, *, records: bool = False,
                 request_timeout_s: float | None = None, load_timeout_s: float | None = None,
                 nodes: int = 1, join_ray: Callable[[int], None] | None = None) -> None:
        """Bind the runner to a server, the run's lock file and the calling test item.

        ``nodes`` (``--sglang-load-nodes``) is given to every load that asks for one node; ``join_ray(n)``
        connects this process to the run's Ray cluster before a load over ``n`` nodes (None: no cluster).
        """
        self.server = server
        self.lock_path = lock_path
        self.item = item
        self.records = records
        #: Defaults for specs that leave them unset (--sglang-request-timeout / --sglang-load-timeout).
        self.request_timeout_s = request_timeout_s
        self.load_timeout_s = load_timeout_s
        self.nodes = nodes
        self.join_ray = join_ray
        #: The marker whose gate is running its loads (None: the test's own ``sglang_load`` call): each
        #: recorded load names it, so a baseline compares only the loads meant as measurements.
        self.gate: str | None = None

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the run-wide load lock (no other load of this run, on any xdist worker, overlaps)."""
        return run_lock(self.lock_path)

    def __call__(self, spec: LoadSpec | None = None, *, server: Handle | None = None,
                 **fields: object) -> LoadResult:
        """Run ``spec`` (or ``LoadSpec(**fields)``) against ``server`` (default: the run's server).

        Args:
            spec: the load shape; give it or its fields, not both.
            server: another server of the run, e.g. one from ``sglang_server_factory``.
            **fields: :class:`~pytest_sglang.LoadSpec` fields (``requests=``, ``concurrency=``, ...).

        Returns:
            The load's metrics; they are also recorded for the gate summary and the reports.
        """
        from pytest_sglang.loadgen import run_load

        if spec is None:
            spec = _spec(fields)
        elif fields:
            raise TypeError("sglang_load(): give either a LoadSpec or LoadSpec fields, not both")
        target = server if server is not None else self.server
        self._require_consent(target, spec)
        spec = spec.with_timeouts(self.request_timeout_s, self.load_timeout_s)
        if spec.nodes == 1 and self.nodes > 1:
            spec = spec.replace(nodes=self.nodes)
        if spec.nodes > 1:
            self._join_ray(spec.nodes)
        with self.lock():
            result = run_load(target.url, spec, api_key=target.api_key)
        results_of(self.item).loads.append(result)
        payload = masks.scrub_payload(result.to_dict(records=self.records))
        if self.gate is not None:
            payload["gate"] = self.gate
        self.item.user_properties.append(("sglang_load", json.dumps(payload)))
        return result

    def _join_ray(self, nodes: int) -> None:
        if self.join_ray is None:
            from pytest_sglang.errors import ConfigError

            raise ConfigError("LoadSpec.nodes", nodes, "spreads the load over Ray nodes, and this run has no Ray "
                              "cluster", "add --sglang-ray auto (or --sglang-ray HOST:PORT), or use nodes=1")
        self.join_ray(nodes)

    def _require_consent(self, target: Handle, spec: LoadSpec) -> None:
        """An attached server's owner consents to a flush or a heavy load (else skip, or fail if strict)."""
        __tracebackhide__ = True
        from pytest_sglang.plugin.consent import heavy_load, require
        from pytest_sglang.plugin.keys import SETTINGS_KEY

        settings = self.item.config.stash.get(SETTINGS_KEY, None)
        why = heavy_load(spec, settings.sglang_heavy_load) if settings is not None else None
        require(self.item.config, target, [why] if why else [])


def _spec(fields: Mapping[str, object]) -> LoadSpec:
    """``LoadSpec(**fields)``; an unknown name is a TypeError naming it and the valid fields."""
    from pytest_sglang.loadgen import LoadSpec

    names = [f.name for f in dataclasses.fields(LoadSpec)]
    for name in fields:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"sglang_load() has no field {name!r}{hint}; LoadSpec fields: {', '.join(names)}")
    # Values come from the test; LoadSpec checks each one (a bad value is its ValueError).
    return LoadSpec(**fields)  # type: ignore[arg-type]


def load_runner(request: pytest.FixtureRequest, server: Handle) -> LoadRunner:
    """The test's :class:`LoadRunner` (marker gates and the ``sglang_load`` fixture record alike)."""
    from pytest_sglang.plugin.keys import POOL_KEY
    from pytest_sglang.plugin.report_session import wants_requests

    pool = request.config.stash[POOL_KEY]
    settings = pool.settings
    return LoadRunner(server, pool.lock_path, request.node, records=wants_requests(settings),
                      request_timeout_s=settings.sglang_request_timeout, load_timeout_s=settings.sglang_load_timeout,
                      nodes=settings.sglang_load_nodes, join_ray=pool.join_ray if pool.ray_address else None)
