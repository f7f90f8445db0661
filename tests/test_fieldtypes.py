"""fieldtypes: an engine dataclass's fields checked against their annotations, in words a user reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.fieldtypes import describe, matches, wrong_type
from pytest_sglang.fleet.launch import FleetSpec
from pytest_sglang.server.config import DockerOptions
from pytest_sglang.server.options.ray import RayOptions


@dataclass
class Sample:
    name: str = "a"
    count: int = 1
    rate: float | None = None
    flag: bool = False
    where: Path | None = None
    argv: tuple[str, ...] = ()
    pairs: tuple[tuple[str, float], ...] = ()
    late: int = field(default=0, init=False)


@pytest.mark.parametrize(("value", "hint", "ok"), [
    (1, int, True), (True, int, False), (1.5, int, False),
    (1, float, True), (False, float, False), ("1", float, False),
    (None, float | None, True), ("x", str | None, True), (3, str | None, False),
    ("/tmp", Path, True), (Path("/tmp"), Path, True), (3, Path, False),
    (["a", "b"], tuple[str, ...], True), ("ab", tuple[str, ...], False), (["a", 1], tuple[str, ...], False),
    ([("gpu", 1)], tuple[tuple[str, float], ...], True), ([("gpu",)], tuple[tuple[str, float], ...], False),
    ({"gpu": 1}, tuple[tuple[str, float], ...], False),
])
def test_matches_reads_the_annotation(value: object, hint: object, ok: bool) -> None:
    assert matches(value, hint) is ok


def test_the_first_wrong_field_is_named_in_words_and_init_false_fields_are_not_read() -> None:
    assert wrong_type(Sample()) is None
    wrong = wrong_type(Sample(argv="--tp 2"))  # type: ignore[arg-type]
    assert wrong is not None and wrong.name == "argv"
    assert wrong.problem == "expected a list of strings (not one string), got str"
    assert wrong.shown(("argv",)) == "<str>" and wrong.shown() == "--tp 2"
    assert describe(tuple[tuple[str, float], ...]) == "a list of (string, number) pairs"
    assert describe(float | None) == "a number or None"
    odd = Sample()
    odd.late = "not read"  # type: ignore[assignment]
    assert wrong_type(odd) is None


@pytest.mark.parametrize(("make", "message"), [
    (lambda: FleetSpec(workers="2"), "FleetSpec.workers='2': expected a whole number, got str"),
    (lambda: FleetSpec(workers=2, gateway_args="--api-key sk-gw-7f"),
     "FleetSpec.gateway_args='<str>': expected a list of strings (not one string), got str"),
    (lambda: RayOptions(ray_cpus="1"), "RayOptions.ray_cpus='1': expected a number, got str"),
    (lambda: RayOptions(ray_resources={"node_a": 1}),
     "RayOptions.ray_resources={'node_a': 1}: expected a list of (string, number) pairs, got dict"),
    (lambda: RayOptions(ray_address=None), "RayOptions.ray_address=None: expected a string, got NoneType"),
    (lambda: DockerOptions(image="i", shm_size=32), "DockerOptions.shm_size=32: expected a string, got int"),
    (lambda: DockerOptions(image="i", ipc_host="yes"), "DockerOptions.ipc_host='yes': expected True or False"),
    (lambda: DockerOptions(image="i", volumes="/a:/b"),
     "DockerOptions.volumes='/a:/b': expected a list of strings (not one string), got str"),
])
def test_every_engine_dataclass_names_a_wrong_type(make: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        make()  # type: ignore[operator]
    assert str(info.value).startswith(message), str(info.value)
    assert "7f" not in str(info.value)


def test_lists_are_kept_as_tuples_so_specs_stay_hashable() -> None:
    spec = FleetSpec(workers=2, gateway_args=["--policy", "round_robin"])  # type: ignore[arg-type]
    assert spec.gateway_args == ("--policy", "round_robin") and hash(spec)
