"""The resolved configuration of one simulator launch (what SGLang computes at startup)."""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass
from pathlib import Path

from pytest_sglang.sglang import hostmem
from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.sglang.vision import Processor
from pytest_sglang.simulator.failures.faults import Faults
from pytest_sglang.simulator.images.vision import for_model
from pytest_sglang.simulator.scheduling.profiles import (
    Hardware,
    Profile,
    device_pool_bytes_per_rank,
    device_pool_tokens,
    hardware,
)


@dataclass(frozen=True)
class SimOptions:
    """The ``--sim-*`` flags."""

    profile: str = "tiny"
    gpu_memory_gb: float | None = None
    host_memory_gb: float | None = None
    time_scale: float = 1.0
    prefill_tok_s: float | None = None
    decode_step_ms: float | None = None
    decode_step_per_req_ms: float | None = None
    faults: tuple[str, ...] = ()
    legacy_hicache_check: bool = False
    trace: str | None = None
    launch_counter: str | None = None
    host_alloc_scale: float = 0.0  # --sim-host-alloc-scale (hostalloc.py): real, touched host pool memory
    launch_jitter: float = 0.0  # --sim-launch-jitter (jitter.py): CV of this launch's speed draw
    launch_seed: int | None = None  # --sim-launch-seed: the draw's seed (None: a fresh draw)
    vocab_size: int | None = None  # --sim-vocab-size (vocab.py): None = 32000, prompt ids not checked
    vision: str = "auto"  # --sim-vision (vision.py): the image processor, auto = from --model-path


@dataclass(frozen=True)
class HostPool:
    """One rank's HiCache host pool."""

    tokens: int
    bytes: int
    ratio: float | None  # the ratio used (None with --hicache-size)
    auto_sized_from: float | None  # the ratio before auto-sizing shrank it


#: Pass-through SGLang flags the simulator does model (no "accepted but not simulated" warning).
MODELLED_PASSTHROUGH = frozenset(
    {
        "disable_cuda_graph",
        "disable_prefill_cuda_graph",
        "disable_decode_cuda_graph",
        "cuda_graph_backend_prefill",
        "cuda_graph_backend_decode",
        # what the model answers (serving.serving): parsers, grammars, seeded sampling
        "tool_call_parser",
        "reasoning_parser",
        "grammar_backend",
        "enable_deterministic_inference",
        # prefill-decode disaggregation (pd*.py)
        "disaggregation_mode",
        "disaggregation_bootstrap_port",
        "disaggregation_transfer_backend",
        "disaggregation_enable_kv_checksum",
        "disaggregation_decode_enable_radix_cache",
        "disaggregation_decode_retraction_backup",
        # multi-node (nodes.py, ranks.py)
        "node_rank",
        "dist_init_addr",
        "dist_timeout",
    }
)


@dataclass(frozen=True)
class SimConfig:
    args: LaunchArgs
    sim: SimOptions
    profile: Profile
    hw: Hardware
    faults: Faults
    model_path: str
    served_model_name: str
    mem_fraction_static: float
    page_size: int
    context_len: int
    chunked_prefill_size: int
    random_seed: int
    max_total_num_tokens: int
    max_running_requests: int
    max_req_input_len: int
    kv_bytes_per_token: int
    host_pool: HostPool | None

    @property
    def weights_seed(self) -> int:
        """What the simulated weights are: one model path, one set of weights (greedy output), on every launch.

        Real SGLang's greedy output depends on the weights only: ``--random-seed`` seeds sampling, and even
        ``--load-format dummy`` initialises its random weights with a fixed seed (1234). So identical workers
        behind a gateway answer alike, as real ones do.
        """
        return zlib.crc32(self.model_path.encode())

    @property
    def vision(self) -> Processor | None:
        """The image processor of the served model (None: text only)."""
        return for_model(self.sim.vision, self.model_path)

    @property
    def ranks(self) -> int:
        return self.args.tp_size * self.args.pp_size

    @property
    def hicache_ratio(self) -> float:
        if self.args.hicache_ratio is not None:
            return self.args.hicache_ratio
        return 1.2 if self.args.hicache_host_memory_mode == "buffer_only" else 2.0

    def scaled(self, seconds: float) -> float:
        return seconds * self.sim.time_scale

    def graph_disabled(self, kind: str) -> str | None:
        """Why the ``kind`` ("prefill" | "decode") CUDA graph is not captured, or None if it is.

        0.5.23 resolves ``--disable-cuda-graph``, ``--disable-{kind}-cuda-graph`` and
        ``--cuda-graph-backend-{kind}=disabled`` into one backend setting.
        """
        extra = self.args.passthrough
        if (
            extra.get("disable_cuda_graph")
            or extra.get(f"disable_{kind}_cuda_graph")
            or extra.get(f"cuda_graph_backend_{kind}") == "disabled"
        ):
            return (
                f"cuda_graph_config resolved {kind}.backend='disabled' (e.g. via "
                f"--cuda-graph-backend-{kind}=disabled or auto-disable rules)"
            )
        return None

    @property
    def on_cpu(self) -> bool:
        return self.args.device == "cpu"


def _max_running(args: LaunchArgs, tokens: int, context_len: int) -> int:
    # sglang/srt/mem_cache/kv_cache_configurator.py: resolve_max_num_reqs
    value = args.max_running_requests
    if value is None:
        value = min(4096, max(2048, int(tokens / context_len * 512)))
    return max(1, min(value, tokens // 2))


def _host_pool(
    args: LaunchArgs, profile: Profile, hw: Hardware, tokens: int, kv_bytes: int, page: int
) -> HostPool | None:
    if not args.enable_hierarchical_cache:
        return None
    if args.hicache_size > 0:
        n = hostmem.host_pool_tokens(args.hicache_size * hostmem.GB, kv_bytes, page)
        return HostPool(n, n * kv_bytes, None, None)
    ratio = args.hicache_ratio if args.hicache_ratio is not None else 2.0
    start = ratio
    if args.hicache_ratio is None:
        # Auto-sizing (§11): budget x fraction x 0.95 over the device bytes to mirror.
        ranks = hostmem.sglang_ranks_per_host(args.tp_size, args.pp_size, args.nnodes)
        budget = (
            hostmem.sglang_budget_bytes(hw.host_available_bytes, ranks) * args.hicache_host_memory_fraction
        )
        device_bytes = max(1, device_pool_bytes_per_rank(profile, tokens, args.tp_size))
        ratio = min(ratio, budget * 0.95 / device_bytes)
    n = hostmem.ratio_pool_tokens(tokens, max(0.0, ratio), page)
    return HostPool(n, n * kv_bytes, ratio, start if ratio != start else None)


def model_context_length(model_path: str | None) -> int | None:
    """``max_position_embeddings`` of a model folder's ``config.json`` (what SGLang derives the context from).

    Gateways show it (smg's ``max_model_len`` label, ``/v1/models``); a path with no readable
    config (the profiles' ``sim/...`` names) gives None and the profile's context length applies.
    """
    config = Path(model_path) / "config.json" if model_path else None
    try:
        if config is None or not config.is_file() or config.stat().st_size > 2**20:
            return None
        value = json.loads(config.read_text()).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def resolve(args: LaunchArgs, sim: SimOptions, profile: Profile, faults: Faults) -> SimConfig:
    """Fill in what SGLang resolves at startup (defaults, capacity, effective limits)."""
    hw = hardware(profile, sim.gpu_memory_gb, sim.host_memory_gb)
    mem_fraction = args.mem_fraction_static or profile.default_mem_fraction_static
    page = args.page_size or 1
    context_len = args.context_length or model_context_length(args.model_path) or profile.context_length
    tokens = device_pool_tokens(
        profile,
        gpu_memory_bytes=hw.gpu_memory_bytes,
        mem_fraction_static=mem_fraction,
        tp_size=args.tp_size,
        pp_size=args.pp_size,
        max_total_tokens=args.max_total_tokens,
    )
    tokens = tokens // page * page
    kv_bytes = profile.kv_bytes_per_token(args.tp_size)
    model_path = args.model_path or profile.model_path
    return SimConfig(
        args=args,
        sim=sim,
        profile=profile,
        hw=hw,
        faults=faults,
        model_path=model_path,
        served_model_name=args.served_model_name or model_path,
        mem_fraction_static=mem_fraction,
        page_size=page,
        context_len=context_len,
        chunked_prefill_size=args.chunked_prefill_size or profile.chunked_prefill_size,
        random_seed=args.random_seed if args.random_seed is not None else random.randint(0, 2**30),
        max_total_num_tokens=tokens,
        max_running_requests=_max_running(args, max(tokens, 2), context_len),
        max_req_input_len=min(context_len - 1, tokens - 1) - 5,
        kv_bytes_per_token=kv_bytes,
        host_pool=_host_pool(args, profile, hw, tokens, kv_bytes, page),
    )
