"""Where this simulated server sits in a multi-node launch (``--nnodes/--node-rank/--dist-init-addr``).

Pure arithmetic, no I/O: which scheduler ranks run on this node (SGLang 0.5.23
``sglang/srt/entrypoints/engine.py`` ``_calculate_rank_ranges``), the rendezvous address and its
timeout. The rendezvous itself is :mod:`pytest_sglang.simulator.launch.ranks`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sglang.sglang.args import LaunchArgs

#: torch's default process-group timeout when ``--dist-timeout`` is not given: 30 minutes for gloo
#: (``--device cpu``), 10 minutes for NCCL (``torch/distributed/constants.py``).
GLOO_TIMEOUT_S = 1800.0
NCCL_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Node:
    """This launch's node rank among ``nnodes`` and how it meets the others."""

    nnodes: int
    node_rank: int
    tp_size: int
    pp_size: int
    dp_size: int
    dist_init_addr: str | None
    timeout_s: float

    @classmethod
    def from_args(cls, args: LaunchArgs) -> Node:
        timeout = args.value("dist_timeout")
        default = GLOO_TIMEOUT_S if args.device == "cpu" else NCCL_TIMEOUT_S
        rank, addr = args.value("node_rank"), args.value("dist_init_addr")
        return cls(nnodes=args.nnodes, node_rank=rank if isinstance(rank, int) else 0,
                   tp_size=args.tp_size, pp_size=args.pp_size, dp_size=args.dp_size,
                   dist_init_addr=addr if isinstance(addr, str) else None,
                   timeout_s=float(timeout) if isinstance(timeout, int) else default)

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1

    @property
    def world_size(self) -> int:
        """Scheduler processes in the whole server (torch's world: tp x pp)."""
        return self.tp_size * self.pp_size

    def schedulers(self) -> list[tuple[int, int]]:
        """(pp_rank, tp_rank) of every scheduler process on this node (all of them on one node)."""
        if not self.multi_node:
            return [(pp, tp) for pp in range(self.pp_size) for tp in range(self.tp_size)]
        pp_per_node = max(self.pp_size // self.nnodes, 1)
        nodes_per_pp = max(self.nnodes // self.pp_size, 1)
        tp_per_node = self.tp_size // nodes_per_pp
        pp0 = pp_per_node * (self.node_rank // nodes_per_pp)
        tp0 = tp_per_node * (self.node_rank % nodes_per_pp)
        return [(pp, tp) for pp in range(pp0, pp0 + pp_per_node) for tp in range(tp0, tp0 + tp_per_node)]

    def check(self) -> str | None:
        """SGLang's own refusal of this topology (``validation_hook.py`` check_server_args), or None."""
        if self.nnodes == 0:
            return "ZeroDivisionError: integer modulo by zero"  # (tp_size * pp_size) % nnodes, as 0.5.23 does
        if self.world_size % self.nnodes:
            return "AssertionError: tp_size must be divisible by number of nodes"
        if self.dp_size > 1 and self.nnodes != 1:
            return ("AssertionError: multi-node data-parallel replicas are not supported; use attention DP "
                    "(--attn-dp-size) across nodes")
        return None
