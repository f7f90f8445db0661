"""A launch's scheduler processes: their log prefixes, and how they die during start-up as 0.5.23's do.

A crash prints SGLang's traceback block and kills the process tree; the kernel's OOM killer and a hang
(a stuck NCCL init) are the other two ``--sim-fault ...-at:PHASE`` endings.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import NoReturn

from pytest_sglang.simulator.config import SimConfig
from pytest_sglang.simulator.launch.nodes import Node
from pytest_sglang.simulator.logs import Logger

#: Where tracebacks say SGLang is installed (the official image's site-packages).
SITE_PACKAGES = "/usr/local/lib/python3.12/dist-packages"
_TRACEBACK = """Traceback (most recent call last):
  File "{root}/sglang/srt/managers/scheduler.py", line 3106, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
  File "{root}/sglang/srt/managers/scheduler.py", line 412, in __init__
    self.init_model_worker()
  File "{where}", line {line}, in {func}
    {stmt}
{error}
"""


def ranks(cfg: SimConfig) -> list[str]:
    """Log prefixes of every scheduler process (``TP3``, ``PP1 TP3``, ``DP1``...).

    0.5.23 names a dimension only when it has more than one rank: a single-GPU server's scheduler
    lines carry no prefix at all (``[2026-12-02 16:43:57] Load weight begin...``).
    """
    return [label for label, _ in schedulers(cfg)]


def schedulers(cfg: SimConfig) -> list[tuple[str, int]]:
    """(log prefix, tp rank) of each scheduler on this node (with --nnodes, this node's share only)."""
    a = cfg.args
    local = Node.from_args(a).schedulers()
    out = []
    for dp in range(a.dp_size):
        for pp, tp in local:
            dims = (("DP", dp, a.dp_size), ("PP", pp, a.pp_size), ("TP", tp, a.tp_size))
            out.append((" ".join(f"{name}{i}" for name, i, n in dims if n > 1), tp))
    return out


def scheduler_exception(
    log: Logger,
    error: str,
    *,
    where: str = "sglang/srt/model_executor/model_runner.py",
    func: str = "load_model",
    stmt: str = "self.model = get_model(...)",
    kill_tree: bool = True,
    rank: str = "TP0",
) -> NoReturn:
    """Print SGLang's block when a scheduler raises during startup, then die like 0.5.23.

    Like 0.5.23, the launcher kills its
    own process tree, itself included, so the exit status is -9 (SIGKILL). ``kill_tree=False`` exits 1
    instead (the documented contract of ``--sim-fault crash-at``).
    """
    path = f"{SITE_PACKAGES}/{where}"
    log.always(
        "Scheduler hit an exception: "
        + _TRACEBACK.format(root=SITE_PACKAGES, where=path, line=871, func=func, stmt=stmt, error=error),
        rank=rank,
    )
    log.always("Received sigquit from a child process. It usually means the child failed.")
    if not kill_tree:
        sys.exit(1)
    log.always(f"kill_process_tree called: parent_pid={os.getpid()}, include_parent=True, pid={os.getpid()}")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)  # not reached


def oom_kill(log: Logger, rank: int = 0) -> NoReturn:
    """The kernel's OOM killer took a scheduler: SGLang's line, then the whole tree dies by SIGKILL."""
    log.always(
        f"Rank {rank} scheduler died during initialization (exit code: -9). If exit code is -9 "
        "(SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."
    )
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(137)  # not reached


def hang(log: Logger, phase: str) -> NoReturn:
    while True:  # a stuck NCCL init / weight download: nothing more happens
        time.sleep(3600)


def fault(cfg: SimConfig, log: Logger, phase: str) -> None:
    """Trigger the ``--sim-fault`` configured for ``phase`` (crash-at / oom-kill-at / hang-at)."""
    kind = cfg.faults.at(phase)
    if kind == "crash-at":
        scheduler_exception(
            log,
            f"RuntimeError: simulated crash during startup phase {phase!r} (--sim-fault crash-at:{phase})",
            kill_tree=False,
            rank=ranks(cfg)[0],
        )
    elif kind == "oom-kill-at":
        oom_kill(log)
    elif kind == "hang-at":
        hang(log, phase)
