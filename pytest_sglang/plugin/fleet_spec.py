"""The run's fleet (``--sglang-workers``, prefill-decode, the gateway) from its settings: one mapping.

The primary launch (:mod:`.pool`) and the A/B launches (:mod:`.ab`) both read it, so a new fleet
setting is mapped here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_sglang.fleet.launch import FleetSpec
    from pytest_sglang.plugin.settings import Settings


def fleet_spec(settings: Settings, gateway: tuple[str, ...] | None = None) -> FleetSpec:
    """The fleet the settings describe, with ``gateway`` args instead of ``--sglang-gateway`` when given.

    Raises :class:`~pytest_sglang.server.config.LaunchConfigError` for a fleet that cannot be launched.
    """
    from pytest_sglang.fleet.launch import FleetSpec  # off the plugin's import path

    return FleetSpec(workers=settings.sglang_workers or 0, gateway_args=gateway or settings.sglang_gateway or (),
                     gateway_command=settings.sglang_gateway_command, min_workers=settings.sglang_min_workers,
                     direct=settings.sglang_fleet_direct, gpus=settings.sglang_gpus,
                     prefill=settings.sglang_prefill or 0, decode=settings.sglang_decode or 0,
                     prefill_args=settings.sglang_prefill_launch or (), decode_args=settings.sglang_decode_launch or ())
