"""The handle's shape a fleet shares with a server is written once (fleet/front.py, issue 31), typed, no __getattr__."""

from __future__ import annotations

from pytest_sglang.fleet import SGLangFleet
from pytest_sglang.fleet.front import GatewayFront
from pytest_sglang.server import SGLangServer
from pytest_sglang.server.members import Handle

#: The Handle protocol's members that only a fleet answers its own way (its workers, its line, its stop).
_FLEET_OWN = {"members", "info", "describe", "stop"}


def _protocol_members() -> set[str]:
    return {name for name in vars(Handle) if not name.startswith("_")}


def test_the_gateway_part_comes_from_one_base() -> None:
    shared = _protocol_members() - _FLEET_OWN
    # Before: SGLangFleet forwarded 17 members to its gateway, one line each, in its own class body.
    assert issubclass(SGLangFleet, GatewayFront)
    assert shared <= set(vars(GatewayFront))
    assert not shared & set(vars(SGLangFleet))
    assert "__getattr__" not in vars(SGLangFleet) and "__getattr__" not in vars(GatewayFront)


def test_a_fleet_answers_the_handle_shape_with_its_gateway() -> None:
    gateway = SGLangServer("http://127.0.0.1:9/", "attach", api_key="k", validate="warn")
    fleet = SGLangFleet(gateway=gateway, flavor="smg", workers=[])
    for name in _protocol_members():
        assert hasattr(fleet, name), name
    assert (fleet.url, fleet.server_url, fleet.api_key, fleet.validate, fleet.mode) == (
        gateway.url, gateway.server_url, "k", "warn", "attach")
    assert (fleet.config, fleet.launch_args, fleet.process, fleet.startup, fleet.log_path, fleet.initial_info) == (
        None, None, None, None, None, None)
    assert fleet.exit_status() is None and fleet.log_tail() == []
