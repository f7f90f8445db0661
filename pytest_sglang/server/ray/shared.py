"""The run's one Ray connection and its runners: every launch and load shard of a process shares them.

``ray.init`` joins one cluster per process, so the connection is process-wide by nature: the first
launch placed on Ray (or the first sharded load) connects, later ones reuse it, and :func:`close`
(pytest's session end, else interpreter exit) releases what was reserved and stops a local Ray this
process started. A runner per (options, inner runner) keeps the seats its preflight reserved for the
start that follows.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
from pathlib import Path

import ray

from pytest_sglang.errors import LaunchConfigError
from pytest_sglang.server.options.ray import OWNER, RayOptions
from pytest_sglang.server.ray import driver_log
from pytest_sglang.server.ray.cluster import RayCluster, connect
from pytest_sglang.server.ray.runner import RayRunner
from pytest_sglang.server.runner import ProcessRunner

__all__ = ["close", "cluster", "gcs_address", "runner"]

_lock = threading.RLock()
_cluster: RayCluster | None = None
_address: str | None = None  # the ray_address the connection was made for
_runners: dict[tuple[RayOptions, type[ProcessRunner]], RayRunner] = {}


def cluster(options: RayOptions, log_dir: Path | None = None) -> RayCluster:
    """The process's connection for ``options.ray_address`` (made once, within its connect timeout).

    Ray's own output of this process goes to ``ray-driver.log`` in ``log_dir`` (the run's logs; else the
    temporary directory), not to this process's stdout and stderr (:mod:`.driver_log`).
    """
    global _cluster, _address
    driver_log.route(Path(log_dir or tempfile.gettempdir()) / (
        driver_log.FILE_NAME if log_dir else f"pytest-sglang-{os.getpid()}-{driver_log.FILE_NAME}"))
    with _lock:
        if _cluster is not None:
            if options.ray_address != _address:
                raise LaunchConfigError(
                    OWNER, "ray_address", options.ray_address,
                    f"this run is already connected to the Ray cluster of ray_address={_address!r}, and one process "
                    "joins one cluster", "give every launch of the run the same {name}")
            return _cluster
        _cluster = connect(options.ray_address, timeout_s=options.ray_connect_timeout_s)
        _address = options.ray_address
        return _cluster


def runner(options: RayOptions, inner: ProcessRunner, log_dir: Path | None = None) -> RayRunner:
    """The Ray runner of ``inner``'s servers with ``options`` (one per pair, for the run)."""
    key = (options, type(inner))
    with _lock:
        found = _runners.get(key)
        if found is None:
            found = _runners[key] = RayRunner(cluster(options, log_dir), inner, options)
        return found


def gcs_address() -> str | None:
    """The connected cluster's GCS address (xdist workers join the controller's cluster with it)."""
    with _lock:
        if _cluster is None or not ray.is_initialized():
            return None
        return str(ray.get_runtime_context().gcs_address)


def close() -> None:
    """Give back unused seats, then stop the local Ray this process started (or disconnect); idempotent."""
    global _cluster, _address
    with _lock:
        runners, current = list(_runners.values()), _cluster
        _runners.clear()
        _cluster, _address = None, None
    for each in runners:
        each.close()
    if current is not None:
        current.close()


atexit.register(close)
