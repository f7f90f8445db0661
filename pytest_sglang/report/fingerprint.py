"""The fingerprint of a run, in two halves: what makes figures comparable, and what is being promoted.

Comparing a candidate with the production baseline is the point of a baseline, so the two halves
are treated differently:

* :data:`COMPARABLE` (model, GPU model and count, host class): the setup the figures were measured
  on. When one differs the figures say more about the hardware or the model than about the change,
  so they are not compared (a warning; ``--sglang-baseline-strict`` fails the comparing tests).
  The workload (each load's shape) is matched per test by :mod:`.baseline`.
* :data:`PROMOTED` (SGLang version, image, runner, launch args): what a candidate changes. A
  difference is compared, and shown as ``candidate vs baseline: <field>: <baseline> -> <candidate>``.

Launch args are normalised: flags that do not change performance (host, port, keys, log paths,
the model, which has its own field) are dropped and the rest sorted, so that
``--tp 2 --page-size 64`` equals ``--page-size 64 --tp 2``. They come from the identity's display
argv, where secrets are already masked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from pytest_sglang.errors import ConfigError
from pytest_sglang.report.identity import ServerIdentity

COMPARABLE = ("model", "gpu_model", "gpu_count", "host")
PROMOTED = ("sglang_version", "image", "runner", "launch_args")
FIELDS = COMPARABLE + PROMOTED

#: ServerArgs fields that say where a server listens, how it logs or authenticates, or which model
#: it serves (a field of its own): not part of the launch args a candidate is compared on.
VOLATILE_DESTS = ("host", "port", "api_key", "admin_api_key", "ssl_keyfile_password", "log_dir", "log_level",
                  "log_level_http", "model_path", "served_model_name", "tokenizer_path", "nccl_port",
                  "dist_init_addr")
#: The same as flags, for launch args SGLang would not parse (they are still normalised).
#: ``--sim-launch-seed`` says which speed draw a simulator launch made, not what was launched.
VOLATILE_FLAGS = frozenset({"--" + dest.replace("_", "-") for dest in VOLATILE_DESTS}
                           | {"--model", "--sim-launch-seed"})


class Fingerprint(TypedDict):
    """The ``fingerprint`` object of the JSON report."""

    model: str | None
    gpu_model: str | None
    gpu_count: int | None
    host: str | None
    sglang_version: str | None
    image: str | None
    runner: str | None
    launch_args: list[str]


@dataclass(frozen=True)
class Change:
    """One promoted field that the candidate changes."""

    field: str
    baseline: str
    candidate: str

    def line(self) -> str:
        """``launch_args: --tp 1 -> --tp 2``."""
        return f"{self.field}: {self.baseline} -> {self.candidate}"

    def to_dict(self) -> dict[str, str]:
        """The JSON report's form (``baseline.candidate_changes`` items)."""
        return {"field": self.field, "baseline": self.baseline, "candidate": self.candidate}


def normalise_args(argv: Sequence[str]) -> list[str]:
    """``["--tp", "2", "--port", "1", "--x=y"]`` -> ``["--tp 2", "--x y"]`` (sorted, volatile dropped)."""
    try:
        # As SGLang reads them: an abbreviated --po 1 or --api-ke K is dropped like the full flag.
        from pytest_sglang.server.config import read_launch  # lazy: a report without a launch never needs it

        kept = read_launch(argv, source="launch args").without(*VOLATILE_DESTS)
    except ConfigError:
        kept = list(argv)
    items: list[str] = []
    i = 0
    while i < len(kept):
        arg = kept[i]
        if arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            i += 1
        elif arg.startswith("--") and i + 1 < len(kept) and not kept[i + 1].startswith("--"):
            flag, value = arg, kept[i + 1]
            i += 2
        else:
            flag, value = arg, ""
            i += 1
        if flag.replace("_", "-") not in VOLATILE_FLAGS:
            items.append(f"{flag} {value}".strip())
    return sorted(items)


def host_class(host: Mapping[str, object]) -> str | None:
    """The host facts that change figures (CPUs, memory); not its name: CI runners are renamed every run."""
    parts = []
    if host.get("cpus"):
        parts.append(f"{host['cpus']} CPUs")
    if host.get("memory_gb"):
        parts.append(f"{host['memory_gb']} GB RAM")
    return ", ".join(parts) or None


def fingerprint(identity: ServerIdentity | None) -> Fingerprint:
    """The fingerprint of a run's server (every field None when no server identity was recorded)."""
    if identity is None:
        return Fingerprint(model=None, gpu_model=None, gpu_count=None, host=None, sglang_version=None, image=None,
                           runner=None, launch_args=[])
    return Fingerprint(
        model=identity.model,
        gpu_model=identity.gpu_model,
        gpu_count=identity.gpu_count,
        host=host_class(identity.host),
        sglang_version=identity.sglang_version,
        image=identity.image,
        runner=identity.runner,
        launch_args=normalise_args(identity.launch_args),
    )


def incomparable(baseline: Mapping[str, object], candidate: Mapping[str, object]) -> list[str]:
    """Lines naming the comparable fields that differ, e.g. ``gpu_model: 'H100' (baseline) != 'A100' (this run)``.

    A field missing from either fingerprint (a report written before the field existed) is skipped.
    """
    return [f"{name}: {baseline[name]!r} (baseline) != {candidate[name]!r} (this run)" for name in COMPARABLE
            if name in baseline and name in candidate and baseline[name] != candidate[name]]


def changes(baseline: Mapping[str, object], candidate: Mapping[str, object]) -> list[Change]:
    """Return the promoted fields the candidate changes.

    A value this run cannot know (an xdist worker does not see the controller's image) is not a change.
    """
    found: list[Change] = []
    for name in PROMOTED:
        before, after = baseline.get(name), candidate.get(name)
        if name not in baseline or after is None:
            continue
        if name == "launch_args":
            found += _arg_change(_items(before), _items(after))
        elif before != after:
            found.append(Change(name, _shown(before), _shown(after)))
    return found


def _items(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _arg_change(before: Sequence[str], after: Sequence[str]) -> list[Change]:
    removed = [a for a in before if a not in after]
    added = [a for a in after if a not in before]
    if not removed and not added:
        return []
    return [Change("launch_args", " ".join(removed) or "(none)", " ".join(added) or "(none)")]


def _shown(value: object) -> str:
    return "unknown" if value is None else str(value)
