"""Which GPUs each worker of a launched fleet gets: worker i takes the i-th block of tp x pp (x dp) devices.

Checked before anything starts: a fleet that needs more GPUs than ``--sglang-gpus`` allows is refused
with the arithmetic. Processes get the block as ``CUDA_VISIBLE_DEVICES``; containers as device IDs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang.args import LaunchArgs

__all__ = ["device_blocks", "device_blocks_for", "gpus_per_worker"]


def gpus_per_worker(args: LaunchArgs) -> int:
    """GPUs one worker uses: tp x pp, times dp when DP ranks are separate replicas (no DP attention)."""
    dp_attention = bool(args.passthrough.get("enable_dp_attention"))
    return args.tp_size * args.pp_size * (1 if dp_attention else args.dp_size)


def _pool(gpus: str, environ: Mapping[str, str]) -> list[str] | None:
    """The GPU IDs the fleet may use, or None when unknown (no list given, none visible, no nvidia-smi)."""
    text = gpus.strip().lower()
    if text == "none":
        return []
    if text.isdigit():
        return [str(i) for i in range(int(text))]
    if text != "all":
        return [part.strip() for part in gpus.split(",") if part.strip()]
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        return [part.strip() for part in visible.split(",") if part.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, timeout=20, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    count = sum(1 for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("GPU "))
    return [str(i) for i in range(count)] if done.returncode == 0 else None


def device_blocks(args: LaunchArgs, workers: int, gpus: str,
                  environ: Mapping[str, str] | None = None) -> list[tuple[str, ...]] | None:
    """One block of GPU IDs per worker, or None when the workers use no GPU (``--device cpu``).

    ``gpus`` is ``--sglang-gpus`` (all, none, a count, or IDs). When the pool is unknown (``all`` on a
    machine without ``nvidia-smi``), blocks are numbered from 0 and nothing is refused.
    """
    blocks = device_blocks_for([args] * workers, gpus, environ)
    return None if all(b is None for b in blocks) else [b or () for b in blocks]


def _uses_gpus(args: LaunchArgs) -> bool:
    return (args.device or "cuda") == "cuda"


def device_blocks_for(workers: Sequence[LaunchArgs], gpus: str,
                      environ: Mapping[str, str] | None = None) -> list[tuple[str, ...] | None]:
    """Worker i's GPU IDs (None for a worker on another device), blocks taken in order from the pool.

    Workers may differ (a prefill-decode fleet's roles may use different tp); the refusal names the sum.
    """
    sizes = [gpus_per_worker(a) if _uses_gpus(a) else 0 for a in workers]
    need = sum(sizes)
    if need == 0:
        return [None] * len(workers)
    pool = _pool(gpus, os.environ if environ is None else environ)
    if pool is not None and need > len(pool):
        shown = ",".join(pool) if pool else "no GPU"
        gpu_workers = [a for a, n in zip(workers, sizes, strict=True) if n]
        first = gpu_workers[0]
        per = sizes[workers.index(first)]
        shape = (f"{len(gpu_workers)} workers x {per} GPU(s) each (tp {first.tp_size} x pp {first.pp_size}"
                 f"{f' x dp {first.dp_size}' if per != first.tp_size * first.pp_size else ''})"
                 if len(set(s for s in sizes if s)) == 1 else
                 f"{len(gpu_workers)} workers needing " + " + ".join(str(s) for s in sizes if s) + " GPUs")
        raise ConfigError("--sglang-workers", len(workers),
                          f"{shape} = {need} GPUs, but --sglang-gpus {gpus} allows {len(pool)} ({shown}); "
                          "nothing was started",
                          "launch fewer workers, a smaller tp, or give more GPUs with --sglang-gpus")
    ids = pool if pool is not None else [str(i) for i in range(need)]
    blocks: list[tuple[str, ...] | None] = []
    at = 0
    for size in sizes:
        blocks.append(tuple(ids[at:at + size]) if size else None)
        at += size
    return blocks
