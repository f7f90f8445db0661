"""The fingerprint: what must be equal for two reports to be compared like with like.

SGLang version, model, runner, GPU model and count, and the launch args. Launch args are
normalised: flags that do not change performance (host, port, keys, log paths) are dropped and the
rest are sorted, so that ``--tp 2 --page-size 64`` equals ``--page-size 64 --tp 2``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang.report.identity import ServerIdentity

FIELDS = ("sglang_version", "model", "runner", "gpu_model", "gpu_count", "launch_args")

#: Launch flags that identify where a server listens or how it logs, not how fast it is.
VOLATILE_FLAGS = frozenset({
    "--host", "--port", "--api-key", "--admin-api-key", "--ssl-keyfile-password", "--log-dir",
    "--log-level", "--log-level-http", "--model-path", "--model", "--served-model-name", "--tokenizer-path",
    "--nccl-port", "--dist-init-addr", "--sim-seed",
})


def normalise_args(argv: Sequence[str]) -> list[str]:
    """``["--tp", "2", "--port", "1", "--x=y"]`` -> ``["--tp 2", "--x y"]`` (sorted, volatile dropped)."""
    items: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            i += 1
        elif arg.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            flag, value = arg, args[i + 1]
            i += 2
        else:
            flag, value = arg, ""
            i += 1
        if flag.replace("_", "-") not in VOLATILE_FLAGS:
            items.append(f"{flag} {value}".strip())
    return sorted(items)


def fingerprint(identity: ServerIdentity | None) -> dict[str, Any]:
    if identity is None:
        return {f: None for f in FIELDS}
    return {
        "sglang_version": identity.sglang_version,
        "model": identity.model,
        "runner": identity.runner,
        "gpu_model": identity.gpu_model,
        "gpu_count": identity.gpu_count,
        "launch_args": normalise_args(identity.launch_args),
    }


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Human lines naming what differs, e.g. ``gpu_model: 'H100' (baseline) != 'A100' (this run)``."""
    lines: list[str] = []
    for name in FIELDS:
        before, after = old.get(name), new.get(name)
        if name == "launch_args":
            lines += _arg_differences(before or [], after or [])
        elif before != after:
            lines.append(f"{name}: {before!r} (baseline) != {after!r} (this run)")
    return lines


def _arg_differences(before: Sequence[str], after: Sequence[str]) -> list[str]:
    removed = [a for a in before if a not in after]
    added = [a for a in after if a not in before]
    lines = []
    if removed:
        lines.append("launch_args: only in the baseline: " + ", ".join(removed))
    if added:
        lines.append("launch_args: only in this run: " + ", ".join(added))
    return lines
