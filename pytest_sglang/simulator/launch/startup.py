"""The startup phases before the port opens, with SGLang 0.5.23's own log lines (reference §9).

Phases run synchronously: like SGLang, nothing listens until they are done. Durations are the
profile's simulated seconds x ``--sim-time-scale``; the returned dict holds the simulated (unscaled)
seconds per phase, which /server_info reports as ``startup_time``.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from pytest_sglang.sglang import hostmem
from pytest_sglang.sglang.hostmem import GB, GiB
from pytest_sglang.simulator.config import SimConfig
from pytest_sglang.simulator.launch.hostalloc import allocate_host_pools
from pytest_sglang.simulator.launch.nodes import Node
from pytest_sglang.simulator.launch.payloads import DECODE_GRAPH_BS, graph_memory_gb, server_args
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
    return [label for label, _ in _schedulers(cfg)]


def _schedulers(cfg: SimConfig) -> list[tuple[str, int]]:
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


class Startup:
    def __init__(self, cfg: SimConfig, log: Logger, port: int,
                 init_parallel: Callable[[list[str]], None] | None = None) -> None:
        self.cfg = cfg
        self.log = log
        self.port = port
        #: The multi-node rendezvous (simulator/launch/ranks.py), run where SGLang's schedulers init torch.distributed.
        self.init_parallel = init_parallel
        self.times: dict[str, float] = {}
        self.ranks = ranks(cfg)
        gpu = cfg.hw.gpu_memory_bytes / GiB
        self.avail = gpu - 0.4  # CUDA context + NCCL buffers
        # --device cpu: 0.5.23 serves the model in float16 and reports CPU memory
        self.kv_dtype = "torch.float16" if cfg.on_cpu else "torch.bfloat16"
        self.mem_name = "available_cpu_mem" if cfg.on_cpu else "available_gpu_mem"

    def _sleep(self, phase: str, seconds: float) -> None:
        self.times[phase] = self.times.get(phase, 0.0) + seconds
        time.sleep(self.cfg.scaled(seconds))

    def run(self) -> None:
        self.log.info(f"server_args={server_args(self.cfg, self.port)!r}")
        if self.init_parallel is not None:
            self.init_parallel(self.ranks)
        self.weights()
        self.kv_cache()
        self.cuda_graph()
        self.summary()
        if self.cfg.host_pool is not None:
            self.hicache()
        if Node.from_args(self.cfg.args).node_rank:
            return  # the tokenizer manager logs the timings, and only node rank 0 runs one
        t = self.times
        self.log.info(
            f"Engine startup timings (s): load_weight={t.get('weights', 0):.2f}, "
            f"kv_cache_allocation={t.get('kv_cache', 0):.2f}, scheduler_e2e={sum(t.values()):.2f}, "
            f"cuda_graph={{prefill={t.get('graph_prefill', 0):.2f}, decode={t.get('graph_decode', 0):.2f}, "
            "target_verify=0.00, draft_prefill=0.00, draft_decode=0.00, draft_extend=0.00}, "
            f"tokenizer_e2e={sum(t.values()):.2f}"
        )

    def weights(self) -> None:
        cfg, p = self.cfg, self.cfg.profile
        for r in self.ranks:
            self.log.info(f"Load weight begin. avail mem={self.avail:.2f} GB", rank=r)
        fault(cfg, self.log, "weights")
        total = p.phase_s.get("weights", 0.0)
        if cfg.args.load_format == "dummy":
            self._sleep("weights", total * 0.05)
        else:
            n = p.num_shards
            for i in range(1, n + 1):
                self._sleep("weights", total / n)
                per = total / n
                self.log.raw(
                    f"Loading safetensors checkpoint shards: {100 * i // n:3d}% Completed | {i}/{n} "
                    f"[{_mmss(per * i)}<{_mmss(per * (n - i))}, {per:5.2f}s/it]\n"
                )
        used = p.weight_bytes_per_rank(cfg.args.tp_size, cfg.args.pp_size) / GiB
        self.avail -= used
        for r in self.ranks:
            self.log.info(
                f"Load weight end. elapsed={self.times['weights']:.2f} s, type={p.architecture}, "
                f"avail mem={self.avail:.2f} GB, mem usage={used:.2f} GB.",
                rank=r,
            )

    def kv_cache(self) -> None:
        cfg = self.cfg
        fault(cfg, self.log, "kv_cache")
        self._sleep("kv_cache", cfg.profile.phase_s.get("kv_cache", 0.0))
        if cfg.max_total_num_tokens <= 0:
            scheduler_exception(
                self.log,
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                f"(mem_fraction_static={cfg.mem_fraction_static}, weights leave no room for the KV cache)",
                where="sglang/srt/mem_cache/kv_cache_configurator.py",
                func="configure",
                stmt="raise RuntimeError(...)",
                rank=self.ranks[0],
            )
        size = cfg.max_total_num_tokens * cfg.kv_bytes_per_token / GiB
        sizes = (
            f"KV size: {size:.2f} GB"
            if cfg.profile.mla
            else f"K size: {size / 2:.2f} GB, V size: {size / 2:.2f} GB"
        )
        # SGLang sizes the pool so that (1 - mem_fraction_static) of the GPU stays free.
        self.avail = cfg.hw.gpu_memory_bytes / GiB * (1 - cfg.mem_fraction_static)
        for r in self.ranks:
            self.log.info(
                f"KV Cache is allocated. dtype: {self.kv_dtype}, #tokens: {cfg.max_total_num_tokens}, {sizes}",
                rank=r,
            )
            self.log.info(f"Memory pool end. avail mem={self.avail:.2f} GB", rank=r)

    def cuda_graph(self) -> None:
        cfg = self.cfg
        total = cfg.profile.phase_s.get("cuda_graph", 0.0)
        for kind, share, backend, detail in (
            ("prefill", 0.3, "breakable", "num_tokens=[4, 8, 16, 32, 64, 128]"),
            ("decode", 0.7, "full", "num_tokens_per_req=1"),
        ):
            reason = cfg.graph_disabled(kind)
            if reason is not None:
                if kind == "prefill":  # 0.5.23 says so for prefill only; decode is skipped silently
                    for r in self.ranks:
                        self.log.info(f"Disable prefill CUDA graph because {reason}.", rank=r)
                    fault(cfg, self.log, "cuda_graph")
                self.times[f"graph_{kind}"] = 0.0
                continue
            for r in self.ranks:
                self.log.info(
                    f"Capture target {kind} CUDA graph begin. backend={backend}, {detail}, "
                    f"avail mem={self.avail:.2f} GB",
                    rank=r,
                )
            if kind == "prefill":
                fault(cfg, self.log, "cuda_graph")
            self._sleep(f"graph_{kind}", total * share)
            used = graph_memory_gb(cfg, kind)
            self.avail -= used
            bs = f"bs={DECODE_GRAPH_BS}, " if kind == "decode" else ""
            for r in self.ranks:
                self.log.info(
                    f"Capture target {kind} CUDA graph end. {bs}elapsed={total * share:.2f} s, "
                    f"mem usage={used:.2f} GB, avail mem={self.avail:.2f} GB.",
                    rank=r,
                )

    def summary(self) -> None:
        cfg = self.cfg
        for rank in (label for label, tp in _schedulers(cfg) if tp == 0):  # scheduler.py: tp_rank == 0 only
            self.log.info(
                f"max_total_num_tokens={cfg.max_total_num_tokens}, chunked_prefill_size="
                f"{cfg.chunked_prefill_size}, max_prefill_tokens={cfg.args.max_prefill_tokens}, "
                f"max_running_requests={cfg.max_running_requests}, context_len={cfg.context_len}, "
                f"{self.mem_name}={self.avail:.2f} GB",
                rank=rank,
            )

    def hicache(self) -> None:
        cfg, pool = self.cfg, self.cfg.host_pool
        assert pool is not None
        fault(cfg, self.log, "hicache")
        available = cfg.hw.host_available_bytes
        a = cfg.args
        if cfg.sim.legacy_hicache_check:
            budget = available - hostmem.SGLANG_RESERVE_BYTES  # pre-0.5.23: each rank vs the whole machine
        else:
            budget = hostmem.sglang_budget_bytes(
                available, hostmem.sglang_ranks_per_host(a.tp_size, a.pp_size, a.nnodes)
            )
        for r in self.ranks:
            if pool.auto_sized_from is not None and pool.ratio is not None:
                self.log.info(
                    f"HiCache auto-sizing: ratio {pool.auto_sized_from:.3f} -> {pool.ratio:.3f}; "
                    f"{budget / GiB:.1f} GiB host memory per rank (fraction "
                    f"{a.hicache_host_memory_fraction:.2f}, {len(self.ranks)} ranks on this host), "
                    f"host pools {pool.bytes / GiB:.1f} GiB.",
                    rank=r,
                )
            self.log.info(
                f"HiCache memory headroom: host {available / GiB:.1f} GiB, cgroup {available / GiB:.1f} GiB",
                rank=r,
            )
        # Every rank checks before any rank pins (they start together), so one check stands for all.
        if pool.bytes > budget:
            scheduler_exception(
                self.log,
                "ValueError: " + hostmem.sglang_oom_message(pool.bytes, budget),
                where="sglang/srt/mem_cache/pool_host/base.py",
                func="_allocate_host_buffer",
                stmt="raise ValueError(",
                rank=self.ranks[0],
            )
        pinned = 0
        for i, r in enumerate(self.ranks):
            if pool.tokens < cfg.max_total_num_tokens:
                self.log.warning(
                    f"HiCache kv host pool ({pool.tokens} tokens) is smaller than the device pool "
                    f"({cfg.max_total_num_tokens} tokens);L2 cache effectiveness is reduced.Consider "
                    "increasing --hicache-ratio (or --hicache-size) for higher L2 cache hit rate.",
                    rank=r,
                )
            self._sleep("hicache", pool.bytes / GB * cfg.profile.hicache_s_per_gb)
            pinned += pool.bytes
            say = functools.partial(self.log.info, rank=r)
            allocate_host_pools(pool.bytes, 1, cfg.sim.host_alloc_scale, say)  # --sim-host-alloc-scale
            if pinned > available:
                oom_kill(self.log, rank=i)  # the legacy check let an oversize pool through
            self.log.info(hostmem.sglang_allocation_line(pool.tokens, pool.bytes), rank=r)


def _mmss(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60:02d}:{s % 60:02d}"
