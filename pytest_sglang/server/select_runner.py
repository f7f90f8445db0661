"""Which runner a :class:`~pytest_sglang.server.config.LaunchConfig` names: process, simulator, docker, on Ray.

Above the runners: ``server/ray/`` builds on the process runner (``server/runner.py``), so choosing among
them lives here rather than in ``runner.py`` (import-linter holds the server package acyclic).
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_sglang.server.base import Runner
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.progress import ProgressSink, line_sink
from pytest_sglang.server.runner import ProcessRunner, SimulatorRunner

__all__ = ["get_runner"]


def get_runner(config: LaunchConfig, progress: ProgressSink | None = None) -> Runner:
    """The runner named by ``config.runner``, placed on Ray with ``config.ray``.

    ``progress`` also receives docker's image-pull lines.
    """
    if config.runner == "docker":
        from pytest_sglang.server.docker.runner import DockerRunner  # lazy: the docker SDK is imported only when used

        say: Callable[[str], None] | None = line_sink(progress)
        runner: Runner = DockerRunner(progress=say)
        return runner
    local = SimulatorRunner() if config.runner == "simulator" else ProcessRunner()
    if config.ray is None:
        return local
    # Lazy: ray is an optional extra (LaunchConfig refused config.ray without it) and a heavy import.
    from pytest_sglang.server.ray import shared

    return shared.runner(config.ray, local, config.log_dir)
