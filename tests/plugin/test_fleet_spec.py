"""Issue 31: the run's fleet is mapped from its settings in one place, for the primary and the A/B launches."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest_sglang
from pytest_sglang.fleet.launch import FleetSpec
from pytest_sglang.plugin import ab, settings
from pytest_sglang.plugin.fleet_spec import fleet_spec


def _fleet_settings() -> settings.Settings:
    return dataclasses.replace(settings.resolve({}, {}, environ={}), sglang_workers=2,
                               sglang_gateway=("--policy", "cache_aware"), sglang_min_workers=1)


def test_every_fleet_setting_reaches_the_spec() -> None:
    spec = fleet_spec(_fleet_settings())
    assert spec == FleetSpec(workers=2, gateway_args=("--policy", "cache_aware"), min_workers=1)
    assert fleet_spec(_fleet_settings(), ("--policy", "round_robin")).gateway_args == ("--policy", "round_robin")


def test_ab_launches_read_the_same_mapping() -> None:
    resolved = _fleet_settings()
    assert ab._fleet(resolved, None) == fleet_spec(resolved)
    assert ab._fleet(settings.resolve({}, {}, environ={}), None) is None  # no fleet asked for


def test_the_plugin_builds_a_fleet_spec_in_one_place() -> None:
    plugin = Path(pytest_sglang.__file__).parent / "plugin"
    building = sorted(p.name for p in plugin.glob("*.py") if re.search(r"\bFleetSpec\(", p.read_text()))
    assert building == ["fleet_spec.py"]
