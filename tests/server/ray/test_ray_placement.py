"""The Ray placement's arithmetic and settings, without a cluster (fake nodes, parsed launch args)."""

from __future__ import annotations

import time

import pytest

from pytest_sglang.errors import ConfigError, LaunchConfigError
from pytest_sglang.server.options.ray import parse_address
from pytest_sglang.server.ray import PlacementRefused, RayNode, RayOptions, connect, plan, server_resources
from pytest_sglang.sglang.args import LaunchArgs, parse_launch_args


def node(address: str, gpus: float, cpus: float = 8, **custom: float) -> RayNode:
    return RayNode(node_id=f"{address.replace('.', '')}abcdef00", address=address, cpus=cpus, gpus=gpus,
                   memory_bytes=10**11, alive=True, custom=tuple(custom.items()))


def args(*argv: str) -> LaunchArgs:
    return parse_launch_args(["--model-path", "m", *argv])


def test_gpus_per_node_are_tp_x_pp_x_dp_over_nnodes() -> None:
    need = server_resources(args("--tp-size", "4", "--pp-size", "2", "--dp-size", "2", "--nnodes", "2"), cpus=2)
    assert (need.gpus, need.cpus) == (8, 2)
    assert need.arithmetic == "tp 4 x pp 2 x dp 2 / nnodes 2"
    assert need.bundle() == {"CPU": 2, "GPU": 8.0}


def test_a_cpu_device_asks_for_no_gpu() -> None:
    need = server_resources(args("--tp-size", "4", "--device", "cpu"), custom=[("node_b", 0.01)])
    assert need.gpus == 0
    assert need.bundle() == {"CPU": 1.0, "node_b": 0.01}


def test_too_big_for_the_largest_node_is_refused_with_the_arithmetic() -> None:
    nodes = [node("10.0.0.2", gpus=2), node("10.0.0.3", gpus=4), node("10.0.0.4", gpus=8)]
    dead = RayNode(node_id="dead", address="10.0.0.4", cpus=8, gpus=8, memory_bytes=0, alive=False)
    with pytest.raises(PlacementRefused) as err:
        plan(args("--tp-size", "4", "--pp-size", "2"), [*nodes[:2], dead])
    text = str(err.value)
    assert "needs 8 GPUs per node (tp 4 x pp 2 x dp 1 / nnodes 1); the largest node, 10.0.0.3 (node 10003abc)" \
           ", has 4 GPUs" in text
    assert "Nothing was started" in text and "Fix:" in text
    assert plan(args("--tp-size", "4", "--pp-size", "2"), nodes).server.gpus == 8  # the 8-GPU node fits


def test_a_custom_resource_no_node_has_is_refused() -> None:
    with pytest.raises(PlacementRefused, match=r"needs node_c 0.01 per server; no alive node has that much"):
        plan(args(), [node("10.0.0.2", gpus=2, node_a=1)], custom=[("node_c", 0.01)])


def test_strict_spread_needs_as_many_fitting_nodes_as_servers() -> None:
    nodes = [node("10.0.0.2", gpus=2), node("10.0.0.3", gpus=1)]
    assert plan(args(), nodes, strategy="STRICT_SPREAD", count=2).count == 2
    with pytest.raises(PlacementRefused) as err:
        plan(args("--tp-size", "2"), nodes, strategy="STRICT_SPREAD", count=2)
    assert ("Ray cannot place 2 bundles of {CPU 1, GPU 2} (strategy STRICT_SPREAD): STRICT_SPREAD puts each bundle on "
            "its own node, so it needs 2 nodes that each have {CPU 1, GPU 2}; the cluster has 1 (10.0.0.2 (node "
            "10002abc))") in str(err.value)
    assert "use strategy SPREAD or PACK" in str(err.value)


# One node of 2 CPUs, as the local Ray of a 2-core machine: each bundle fits, the group may not.
SMALL = [node("127.0.0.1", gpus=0, cpus=2)]
TWO_SMALL = [node("10.0.0.2", gpus=0, cpus=2), node("10.0.0.3", gpus=0, cpus=2)]


@pytest.mark.parametrize(("strategy", "nodes", "count", "said"), [
    ("PACK", SMALL, 3, "PACK may use any nodes, but each bundle lies on one node: it needs {CPU 3} in all; the cluster "
                       "has 1 alive node with {CPU 2} in all, room for 2 bundles (127.0.0.1 (node 127001ab): 2)"),
    ("SPREAD", TWO_SMALL, 5, "it needs {CPU 5} in all; the cluster has 2 alive nodes with {CPU 4} in all, room for 4 "
                             "bundles (10.0.0.2 (node 10002abc): 2; 10.0.0.3 (node 10003abc): 2)"),
    ("STRICT_PACK", TWO_SMALL, 3, "STRICT_PACK puts every bundle on one node, so it needs {CPU 3} on one node; the "
                                  "largest, 10.0.0.2 (node 10002abc), has {CPU 2} (room for 2 bundles)"),
    ("STRICT_SPREAD", SMALL, 2, "STRICT_SPREAD puts each bundle on its own node, so it needs 2 nodes that each have "
                                "{CPU 1}; the cluster has 1 (127.0.0.1 (node 127001ab))"),
])
def test_a_group_the_cluster_could_never_hold_is_refused_per_strategy(
        strategy: str, nodes: list[RayNode], count: int, said: str) -> None:
    with pytest.raises(PlacementRefused) as err:
        plan(args(), nodes, strategy=strategy, count=count, simulator=True)
    text = str(err.value)
    assert said in text, text
    assert text.startswith(f"Ray cannot place {count} bundles of {{CPU 1}} (strategy {strategy}): ")
    assert "Nothing was started" in text and "Fix: start fewer servers at once" in text


@pytest.mark.parametrize(("strategy", "nodes", "count"), [
    ("PACK", SMALL, 2), ("SPREAD", TWO_SMALL, 4), ("STRICT_PACK", TWO_SMALL, 2), ("STRICT_SPREAD", TWO_SMALL, 2)])
def test_a_group_that_fits_the_totals_is_planned(strategy: str, nodes: list[RayNode], count: int) -> None:
    # Whether it is free now is Ray's to wait for (reserve), not a refusal.
    assert plan(args(), nodes, strategy=strategy, count=count, simulator=True).count == count


def test_a_node_holds_whole_bundles_only() -> None:
    # 2 x 1.5 CPUs = 3 CPUs in all, but a bundle of 1 CPU cannot span nodes: room for 2, not 3.
    nodes = [node("10.0.0.2", gpus=0, cpus=1.5), node("10.0.0.3", gpus=0, cpus=1.5)]
    with pytest.raises(PlacementRefused, match=r"with \{CPU 3\} in all, room for 2"):
        plan(args(), nodes, count=3, simulator=True)
    assert plan(args(), nodes, count=3, cpus=0.5, simulator=True).count == 3


def test_a_bad_strategy_names_the_field_and_lists_ray_s_names() -> None:
    with pytest.raises(LaunchConfigError) as err:
        RayOptions(ray_strategy="ROUND_ROBIN")
    assert err.value.source == "RayOptions.ray_strategy"
    assert "expected one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD" in str(err.value)
    assert err.value.for_option("--sglang-ray-strategy").source == "--sglang-ray-strategy"
    assert RayOptions(ray_strategy="spread").ray_strategy == "SPREAD"


@pytest.mark.parametrize(("field", "value"), [("ray_cpus", 0.0), ("ray_resources", (("GPU", 1.0),)),
                                              ("ray_resources", (("node_b", 0.0),))])
def test_other_bad_options_name_their_field(field: str, value: object) -> None:
    with pytest.raises(LaunchConfigError) as err:
        RayOptions(**{field: value})  # type: ignore[arg-type]
    assert err.value.source == f"RayOptions.{field}"


@pytest.mark.parametrize(("given", "kind", "target"), [
    ("10.0.0.1:6379", "gcs", "10.0.0.1:6379"), ("ray://head:10001", "client", "ray://head:10001"),
    ("[::1]:6379", "gcs", "[::1]:6379")])
def test_addresses_ray_accepts(given: str, kind: str, target: str) -> None:
    parsed = parse_address(given)
    assert (parsed.kind, parsed.target) == (kind, target)


def test_auto_is_ray_address_when_set_else_a_local_ray() -> None:
    assert parse_address("auto").kind == "local"
    assert parse_address("auto", env_address="10.0.0.1:6379").target == "10.0.0.1:6379"
    assert "from RAY_ADDRESS" in parse_address("auto", env_address="10.0.0.1:6379").shown


@pytest.mark.parametrize(("given", "problem"), [("http://head:8265", "the dashboard/jobs API"),
                                                ("head", "not a Ray address"), ("head:99999", "not a Ray address")])
def test_bad_address_syntax(given: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        connect(given)
    assert err.value.source == "RayOptions.ray_address"
    assert problem in str(err.value) and "ray://host:10001" in str(err.value)


def test_an_unreachable_cluster_is_a_config_error_with_the_password_masked() -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError) as err:
        connect("ray://admin:hunter2@127.0.0.1:1", timeout_s=5)
    text = str(err.value)
    assert time.monotonic() - started < 5
    assert err.value.source == "RayOptions.ray_address"
    assert "hunter2" not in text and "ray://admin:***@127.0.0.1:1" in text
    assert "cannot reach the cluster: nothing answers at 127.0.0.1:1" in text
    assert "ray start --head" in text and "Traceback" not in text
