"""Place servers on Ray nodes: ``connect`` a cluster, then start servers with a ``RayRunner``.

Usable without pytest::

    from pytest_sglang.server.ray import RayOptions, RayRunner, connect
    from pytest_sglang.server.runner import SimulatorRunner

    with connect("auto") as cluster:  # RAY_ADDRESS, else a local Ray for this run
        runner = RayRunner(cluster, SimulatorRunner(), RayOptions(ray_strategy="SPREAD"))
        proc = runner.start(config, 0, log_path)  # port 0: a free port on the chosen node
        ...
        proc.stop()

Ray is an optional extra (``pip install 'pytest-sglang[ray]'``). Names load on first use (PEP 562),
so :mod:`.options` (the settings, no Ray import) can be read where Ray is not installed.
Modules: :mod:`.options`, :mod:`.cluster`, :mod:`.placement`, :mod:`.node_process` (the actor and
the leftover sweep, on the node), :mod:`.process` (the driver's handle), :mod:`.runner`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_sglang import lazy

_EXPORTS: dict[str, str] = {
    "RayOptions": "pytest_sglang.server.options.ray",
    "STRATEGIES": "pytest_sglang.server.options.ray",
    "RayCluster": "pytest_sglang.server.ray.cluster",
    "RayNode": "pytest_sglang.server.ray.cluster",
    "connect": "pytest_sglang.server.ray.cluster",
    "PlacementPlan": "pytest_sglang.server.ray.placement",
    "PlacementRefused": "pytest_sglang.server.ray.placement",
    "PlacementTimeout": "pytest_sglang.server.ray.placement",
    "ServerResources": "pytest_sglang.server.ray.placement",
    "plan": "pytest_sglang.server.ray.placement",
    "server_resources": "pytest_sglang.server.ray.placement",
    "NodeLost": "pytest_sglang.server.ray.process",
    "RayProcess": "pytest_sglang.server.ray.process",
    "RayRunner": "pytest_sglang.server.ray.runner",
}

__all__ = [
    "STRATEGIES", "NodeLost", "PlacementPlan", "PlacementRefused", "PlacementTimeout", "RayCluster", "RayNode",
    "RayOptions", "RayProcess", "RayRunner", "ServerResources", "connect", "plan", "server_resources",
]


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)


if TYPE_CHECKING:
    from pytest_sglang.server.options.ray import STRATEGIES, RayOptions
    from pytest_sglang.server.ray.cluster import RayCluster, RayNode, connect
    from pytest_sglang.server.ray.placement import (
        PlacementPlan,
        PlacementRefused,
        PlacementTimeout,
        ServerResources,
        plan,
        server_resources,
    )
    from pytest_sglang.server.ray.process import NodeLost, RayProcess
    from pytest_sglang.server.ray.runner import RayRunner
