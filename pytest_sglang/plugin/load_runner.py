"""The ``sglang_load`` runtime: run a load against a server under the run-wide lock and record it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_sglang import redaction
from pytest_sglang.plugin.results import results_of


@contextlib.contextmanager
def run_lock(path: str) -> Iterator[None]:
    """The run-wide load lock: load-generating tests never overlap, also across xdist workers."""
    # filelock, imported here: portable (fcntl on POSIX, msvcrt on Windows) and off the import path.
    from filelock import FileLock

    with FileLock(path):
        yield


class LoadRunner:
    """``runner(spec=None, *, server=None, **LoadSpec fields) -> LoadResult``, locked and recorded.

    ``records``: keep the per-request records in the stored result (``--sglang-report-requests``
    and ``--sglang-html`` need them; they are large, so only then). ``lock()`` is the run-wide load
    lock, public for gates and tests that drive their own traffic (e.g. the hicache workload).
    """

    def __init__(self, server: Any, lock_path: str, item: pytest.Item, *, records: bool = False) -> None:
        self.server = server
        self.lock_path = lock_path
        self.item = item
        self.records = records

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the run-wide load lock (no other load of this run, on any xdist worker, overlaps)."""
        return run_lock(self.lock_path)

    def __call__(self, spec: Any = None, *, server: Any = None, **fields: Any) -> Any:
        from pytest_sglang.loadgen import LoadSpec, run_load

        if spec is None:
            spec = LoadSpec(**fields)
        elif fields:
            raise TypeError("give either a LoadSpec or LoadSpec fields, not both")
        target = server if server is not None else self.server
        with self.lock():
            result = run_load(target.url, spec, api_key=target.api_key)
        results_of(self.item).loads.append(result)
        payload = redaction.scrub_payload(result.to_dict(records=self.records))
        self.item.user_properties.append(("sglang_load", json.dumps(payload)))
        return result


def load_runner(request: pytest.FixtureRequest, server: Any) -> LoadRunner:
    """The test's :class:`LoadRunner` (marker gates and the ``sglang_load`` fixture record alike)."""
    from pytest_sglang.plugin.pool import POOL_KEY
    from pytest_sglang.plugin.report_session import wants_requests

    pool = request.config.stash[POOL_KEY]
    return LoadRunner(server, pool.lock_path, request.node, records=wants_requests(pool.settings))
