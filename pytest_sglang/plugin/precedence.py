"""Settling settings that contradict each other, by the one precedence order (CLI > env > ini).

Two pairs contradict:

- ``--sglang-simulate`` (the simulator runner) and ``--sglang-runner process|docker``;
- ``--sglang-url`` (attach) and a launch (``--sglang-launch``, or the simulator's default launch).

The setting from the higher source wins and the report header says which one lost (a team's ini
may launch by default while CI passes ``--sglang-url``). From the same source level the intent is
unknowable, so it is a usage error naming both settings and where each came from. Settings given
where they do not act (docker options without the docker runner, launch options when attaching) are
named in the header too, so nothing is ignored silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_sglang.errors import ConfigError

if TYPE_CHECKING:
    from pytest_sglang.plugin.options import Option

_LEVELS = {"cli": 3, "env": 2, "ini": 1}
_LEVEL_NAMES = {3: "the command line", 2: "the environment", 1: "the ini file"}


def level(source: str | None) -> int:
    """3 for the command line, 2 for the environment, 1 for the ini file, 0 for the default."""
    return 0 if source is None else _LEVELS.get(source.split(" ", 1)[0], 0)


def written(option: Option, source: str) -> str:
    """The option as the user wrote it in ``source`` (``--sglang-x``, ``env PYTEST_SGLANG_X``, ``ini option x``)."""
    return {"cli": option.cli, "ini": f"ini option {option.name}"}.get(source, source)


def label(option: Option, source: str | None) -> str:
    """``--sglang-runner (cli)``, ``--sglang-url (env PYTEST_SGLANG_URL)``."""
    return f"{option.cli} ({source or 'default'})"


def settle(values: dict[str, Any], sources: Mapping[str, str], options: Mapping[str, Option]) -> tuple[str, ...]:
    """Apply the precedence to contradicting settings in ``values`` (in place); return header notes."""
    notes = [*_settle_runner(values, sources, options), *_settle_url(values, sources, options)]
    notes += _ray_needs(values, sources, options)
    notes += _margin_needs_floors(values, sources, options)
    notes += _not_acting(values, sources, options, mentioned=" ".join(notes))
    return tuple(notes)


def _ray_needs(values: Mapping[str, Any], sources: Mapping[str, str], options: Mapping[str, Option]) -> list[str]:
    """What the Ray settings need from the others: refused before anything starts, or a header note."""
    ray, nodes = options["sglang_ray"], options["sglang_load_nodes"]
    if values["sglang_load_nodes"] > 1 and values["sglang_ray"] is None:
        raise ConfigError(written(nodes, sources.get("sglang_load_nodes", "cli")), values["sglang_load_nodes"],
                          "spreads each load over Ray nodes, and no Ray cluster is given",
                          f"add {ray.cli} auto (RAY_ADDRESS, else a local Ray) or {ray.cli} HOST:PORT, or drop "
                          f"{nodes.cli}")
    if values["sglang_ray"] is None:
        return []
    source = sources.get("sglang_ray")
    if values["sglang_url"] is None and values["sglang_runner"] == "docker":
        raise ConfigError(written(ray, source or "cli"), ray.shown(values["sglang_ray"]),
                          "places server processes on Ray nodes, and the docker runner starts containers here",
                          f"use {ray.cli} with --sglang-runner process or --sglang-simulate, or drop {ray.cli}")
    if values["sglang_url"] is not None and values["sglang_load_nodes"] == 1:
        return [f"{label(ray, source)}: attaching to --sglang-url, so Ray only runs load shards "
                "(--sglang-load-nodes N or a marker's load_nodes)"]
    return []


def _margin_needs_floors(values: Mapping[str, Any], sources: Mapping[str, str],
                         options: Mapping[str, Option]) -> list[str]:
    """A floors margin without ``--sglang-suggest-floors`` changes nothing: said in the header (an ini may set it)."""
    margin = options["sglang_suggest_floors_margin"]
    if margin.name not in sources or values["sglang_suggest_floors"]:
        return []
    return [f"not used without --sglang-suggest-floors: {label(margin, sources[margin.name])}"]


def _conflict(first: Option, first_source: str, first_value: str, second: Option, second_source: str,
              meaning: str, fix: str) -> ConfigError:
    where = _LEVEL_NAMES[level(first_source)]
    problem = (f"contradicts {label(second, second_source)}, {meaning}; both come from {where}, so "
               "neither wins")
    return ConfigError(label(first, first_source), first_value, problem, fix)


def _settle_runner(values: dict[str, Any], sources: Mapping[str, str],
                   options: Mapping[str, Option]) -> list[str]:
    runner, simulate = options["sglang_runner"], options["sglang_simulate"]
    if not values["sglang_simulate"]:
        return []
    runner_source = sources.get("sglang_runner")
    if runner_source is None or values["sglang_runner"] == "simulator":
        values["sglang_runner"] = "simulator"
        return []
    simulate_source = sources["sglang_simulate"]
    if level(runner_source) == level(simulate_source):
        raise _conflict(runner, runner_source, values["sglang_runner"], simulate, simulate_source,
                        "which selects the simulator runner",
                        f"give only one: {runner.cli} {values['sglang_runner']} to launch real SGLang, or "
                        f"{simulate.cli} to launch the simulator")
    if level(simulate_source) > level(runner_source):
        note = f"{label(simulate, simulate_source)} wins over {label(runner, runner_source)}"
        values["sglang_runner"] = "simulator"
    else:
        note = f"{label(runner, runner_source)} wins over {label(simulate, simulate_source)}"
        values["sglang_simulate"] = False
    return [f"{note} (the higher source wins)"]


def _launch_source(values: Mapping[str, Any], sources: Mapping[str, str],
                   options: Mapping[str, Option]) -> tuple[Option, str] | None:
    """The setting that asks for a launch and its source, or None when nothing is to be launched."""
    if values["sglang_launch"] is not None:
        return options["sglang_launch"], sources["sglang_launch"]
    if values["sglang_runner"] != "simulator":
        return None  # another runner without launch args launches nothing
    name = "sglang_simulate" if values["sglang_simulate"] else "sglang_runner"
    return options[name], sources[name]


def _settle_url(values: dict[str, Any], sources: Mapping[str, str],
                options: Mapping[str, Option]) -> list[str]:
    launch = _launch_source(values, sources, options)
    if values["sglang_url"] is None or launch is None:
        return []
    url, url_source = options["sglang_url"], sources["sglang_url"]
    launch_option, launch_source = launch
    if level(url_source) == level(launch_source):
        raise _conflict(url, url_source, url.shown(values["sglang_url"]), launch_option, launch_source,
                        "which launches a server",
                        f"give only one: {url.cli} URL to attach to a running server, or "
                        f"{launch_option.cli} to launch one")
    if level(url_source) > level(launch_source):
        return [f"{label(url, url_source)} wins over {label(launch_option, launch_source)} "
                "(the higher source wins): attaching, nothing is launched"]
    values["sglang_url"] = None
    return [f"{label(launch_option, launch_source)} wins over {label(url, url_source)} "
            "(the higher source wins): launching, the URL is not used"]


def _not_acting(values: Mapping[str, Any], sources: Mapping[str, str], options: Mapping[str, Option],
                mentioned: str) -> list[str]:
    """Return settings given where they do nothing.

    Launch options when attaching or when nothing is launched, docker options with another runner.
    """
    attaching = values["sglang_url"] is not None
    launching = not attaching and _launch_source(values, sources, options) is not None
    unused = {"launch": not launching, "docker": not launching or values["sglang_runner"] != "docker"}
    given = [(o, label(o, sources[o.name])) for o in options.values() if o.name in sources]
    idle = [text for o, text in given if unused.get(o.scope, False) and text not in mentioned]
    if not idle:
        return []
    if attaching:
        why = "when attaching to --sglang-url"
    elif launching:
        why = "without --sglang-runner docker"
    else:
        why = "as nothing is launched (no --sglang-launch ARGS)"
    return [f"not used {why}: {', '.join(idle)}"]
