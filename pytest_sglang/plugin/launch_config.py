"""Settings -> the engine's :class:`~pytest_sglang.server.config.LaunchConfig`, in the plugin's words.

The engine names its own fields when a value is wrong (``LaunchConfig.runner='k8s'``, ``DockerOptions.
gpus='0'``); a pytest user never wrote those, so :func:`launch_config` re-words such an error for the
option that set the field (``--sglang-runner='k8s'``, ``--sglang-gpus='0'``). Most bad values never get
this far: the option rows check them at configure time (``plugin/settings.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang.errors import ConfigError, LaunchConfigError

if TYPE_CHECKING:
    from pytest_sglang.plugin.settings import Settings
    from pytest_sglang.server.config import DockerOptions, LaunchConfig
    from pytest_sglang.server.options.ray import RayOptions

__all__ = ["OPTION_FOR_FIELD", "for_option", "launch_config", "ray_options"]

#: ``Owner.field`` of the engine -> the option that sets it.
OPTION_FOR_FIELD = {
    "LaunchConfig.runner": "--sglang-runner",
    "LaunchConfig.args": "--sglang-launch",
    "LaunchConfig.command": "--sglang-command",
    "LaunchConfig.python": "--sglang-python",
    "LaunchConfig.env": "--sglang-env",
    "LaunchConfig.startup_timeout_s": "--sglang-startup-timeout",
    "LaunchConfig.api_key": "--sglang-api-key",
    "LaunchConfig.validate": "--sglang-validate",
    "LaunchConfig.preflight": "--sglang-no-preflight",
    "LaunchConfig.host_memory_reserve_gb": "--sglang-host-memory-reserve-gb",
    "LaunchConfig.log_dir": "--sglang-log-dir",
    "DockerOptions.image": "--sglang-image",
    "DockerOptions.gpus": "--sglang-gpus",
    "DockerOptions.shm_size": "--sglang-shm-size",
    "DockerOptions.ipc_host": "--sglang-ipc-host",
    "DockerOptions.volumes": "--sglang-volume",
    "DockerOptions.memory": "--sglang-docker-memory",
    "DockerOptions.pull": "--sglang-pull",
    "DockerOptions.network": "--sglang-docker-network",
    "LaunchConfig.ray": "--sglang-ray",
    "RayOptions.ray_address": "--sglang-ray",
    "RayOptions.ray_strategy": "--sglang-ray-strategy",
    "FleetSpec.workers": "--sglang-workers",
    "FleetSpec.prefill": "--sglang-prefill",
    "FleetSpec.decode": "--sglang-decode",
    "FleetSpec.min_workers": "--sglang-min-workers",
    "FleetSpec.direct": "--sglang-fleet-direct",
}


def launch_config(settings: Settings, log_dir: Path) -> LaunchConfig:
    """Settings -> the engine's LaunchConfig (everything that defines a launch).

    Raises :class:`ConfigError` naming the option (not the engine's field) for a value the engine refuses.
    """
    from pytest_sglang.server.config import LaunchConfig

    try:
        return LaunchConfig(
            runner=settings.runner,
            args=tuple(settings.launch_args or ()),
            command=settings.sglang_command,
            python=settings.sglang_python,
            env=tuple(sorted(settings.env_dict.items())),
            startup_timeout_s=settings.sglang_startup_timeout,
            api_key=settings.sglang_api_key,
            validate=settings.sglang_validate,
            preflight=not settings.sglang_no_preflight,
            host_memory_reserve_gb=settings.sglang_host_memory_reserve_gb,
            log_dir=log_dir,
            docker=_docker_options(settings),
            ray=ray_options(settings),
        )
    except LaunchConfigError as exc:
        raise for_option(exc) from None


def for_option(exc: LaunchConfigError) -> ConfigError:
    """``exc`` re-worded for the option that set its field (unchanged when no option sets it)."""
    option = OPTION_FOR_FIELD.get(f"{exc.owner}.{exc.field}")
    return exc if option is None else exc.for_option(option)


def ray_options(settings: Settings, address: str | None = None) -> RayOptions | None:
    """``--sglang-ray`` and its strategy as the engine's :class:`RayOptions` (None: launch here).

    ``address`` replaces the option's (an xdist worker joins the controller's cluster by its GCS address).
    """
    address = address or settings.sglang_ray
    if address is None:
        return None
    from pytest_sglang.server.options.ray import RayOptions

    try:
        return RayOptions(ray_address=address, ray_strategy=settings.sglang_ray_strategy)
    except LaunchConfigError as exc:
        raise for_option(exc) from None


def _docker_options(settings: Settings) -> DockerOptions | None:
    if settings.runner != "docker":
        return None
    from pytest_sglang.server.config import DockerOptions

    return DockerOptions(image=settings.sglang_image, gpus=settings.sglang_gpus,
                         shm_size=settings.sglang_shm_size,
                         ipc_host=settings.sglang_ipc_host, volumes=settings.sglang_volume,
                         memory=settings.sglang_docker_memory, pull=settings.sglang_pull,
                         network=settings.sglang_docker_network)
