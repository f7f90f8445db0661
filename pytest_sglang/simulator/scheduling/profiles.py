"""Hardware + model profiles of the simulator, and the capacity arithmetic derived from them.

A profile fixes what a real launch would discover at startup: GPU memory per rank, the host's RAM,
the model's KV bytes per token and weight bytes per rank, the phase durations and the speed model.
The arithmetic is SGLang's (reference §2.2, §11): device KV pool = (GPU memory x mem_fraction_static
- weights per rank) / KV bytes per token; host pools per rank from ``--hicache-size`` GB or
``--hicache-ratio`` via :mod:`pytest_sglang.sglang.hostmem`, so preflight and planner agree by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_sglang.sglang import hostmem
from pytest_sglang.sglang.hostmem import GB, GiB


@dataclass(frozen=True)
class Speed:
    """Speed model (simulated seconds): prefill throughput and decode step time vs batch size."""

    prefill_tok_s: float
    prefill_base_s: float
    decode_base_s: float
    decode_per_req_s: float

    def decode_step_s(self, batch: int) -> float:
        # base + per-request cost: throughput batch/step rises with batch and saturates at 1/per_req.
        return self.decode_base_s + self.decode_per_req_s * batch

    def prefill_s(self, new_tokens: int) -> float:
        return self.prefill_base_s + new_tokens / self.prefill_tok_s


@dataclass(frozen=True)
class Profile:
    """One simulated deployment (model + hardware)."""

    name: str
    model_path: str
    architecture: str
    model_type: str
    context_length: int
    num_layers: int
    #: KV bytes per token on ONE rank at tp=1 (MHA is split over TP ranks, MLA is replicated).
    kv_bytes_per_token_tp1: int
    mla: bool
    kv_heads: int
    weight_bytes_total: int
    gpu_memory_bytes: int
    gpu_name: str
    host_total_bytes: int
    #: RAM the OS and other processes already use on the simulated host.
    host_used_bytes: int
    default_mem_fraction_static: float
    chunked_prefill_size: int
    num_shards: int
    #: simulated seconds of each startup phase at --sim-time-scale 1.
    phase_s: dict[str, float] = field(default_factory=dict)
    #: simulated seconds to pin one GB of host pool (hicache allocation).
    hicache_s_per_gb: float = 0.0
    speed: Speed = Speed(50_000.0, 0.002, 0.010, 0.00005)

    def kv_bytes_per_token(self, tp_size: int) -> int:
        """Per-rank KV bytes per token: MLA keeps the full latent on every rank, MHA splits heads."""
        if self.mla:
            return self.kv_bytes_per_token_tp1
        heads_per_rank = max(1, self.kv_heads // max(1, tp_size))
        return self.kv_bytes_per_token_tp1 * heads_per_rank // self.kv_heads

    def weight_bytes_per_rank(self, tp_size: int, pp_size: int = 1) -> int:
        return self.weight_bytes_total // max(1, tp_size * pp_size)


# Kimi-K2.5 (DeepSeek-V3 architecture, ~1T parameters, INT4 experts) on 8x RTX PRO 6000 (96 GB).
# MLA KV per token: (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers x 2 bytes = 70,272 B,
# replicated on every TP rank. Weights 79.622 GB per rank at TP 8 (~637 GB in total). See
# docs/simulator.md for the capacity arithmetic (~116.7k tokens at 0.852, 231,125 at 0.93).
KIMI = Profile(
    name="kimi-k2.5-rtx6000x8",
    model_path="moonshotai/Kimi-K2.5",
    architecture="DeepseekV3ForCausalLM",
    model_type="kimi_k25",
    context_length=262_144,
    num_layers=61,
    kv_bytes_per_token_tp1=(512 + 64) * 61 * 2,
    mla=True,
    kv_heads=1,
    weight_bytes_total=8 * 79_622_000_000,
    gpu_memory_bytes=96 * GiB,
    gpu_name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
    host_total_bytes=449 * GB,
    host_used_bytes=31 * GB,
    default_mem_fraction_static=0.852,
    chunked_prefill_size=8192,
    num_shards=64,
    # ~11 minutes at time scale 1 (weights dominate, as on the seed deployment).
    phase_s={"weights": 520.0, "kv_cache": 8.0, "cuda_graph": 120.0, "uvicorn": 4.0, "warmup": 6.0},
    hicache_s_per_gb=0.1,
    speed=Speed(prefill_tok_s=9_000.0, prefill_base_s=0.03, decode_base_s=0.025, decode_per_req_s=0.00025),
)

# A small Llama-like model on one small GPU: 4 layers x 8 KV heads x 64 dims x (K+V) x 2 bytes.
TINY = Profile(
    name="tiny",
    model_path="sim/tiny-llama",
    architecture="LlamaForCausalLM",
    model_type="llama",
    context_length=8192,
    num_layers=4,
    kv_bytes_per_token_tp1=4 * 8 * 64 * 2 * 2,
    mla=False,
    kv_heads=8,
    weight_bytes_total=256 * 2**20,
    gpu_memory_bytes=1 * GiB,
    gpu_name="NVIDIA T4 (simulated, 1 GiB)",
    host_total_bytes=32 * GB,
    host_used_bytes=4 * GB,
    default_mem_fraction_static=0.719,
    chunked_prefill_size=4096,
    num_shards=2,
    phase_s={"weights": 0.3, "kv_cache": 0.1, "cuda_graph": 0.2, "uvicorn": 0.1, "warmup": 0.2},
    hicache_s_per_gb=0.01,
)

PROFILES: dict[str, Profile] = {p.name: p for p in (TINY, KIMI)}


def get_profile(name: str) -> Profile:
    """The profile called ``name``; the error names the flag, the value and the choices."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"--sim-profile {name!r} is not a simulator profile; choose one of {', '.join(PROFILES)}"
        ) from None


@dataclass(frozen=True)
class Hardware:
    gpu_memory_bytes: int
    host_total_bytes: int
    host_available_bytes: int


def hardware(profile: Profile, gpu_memory_gb: float | None, host_memory_gb: float | None) -> Hardware:
    """The profile's hardware with the memory flags applied.

    ``--sim-gpu-memory-gb`` (GiB, like SGLang's device logs) and
    ``--sim-host-memory-gb`` (decimal GB of RAM in total) applied.
    """
    gpu = profile.gpu_memory_bytes if gpu_memory_gb is None else int(gpu_memory_gb * GiB)
    total = profile.host_total_bytes if host_memory_gb is None else int(host_memory_gb * GB)
    return Hardware(gpu, total, max(0, total - profile.host_used_bytes))


def device_pool_tokens(
    profile: Profile,
    *,
    gpu_memory_bytes: int,
    mem_fraction_static: float,
    tp_size: int,
    pp_size: int = 1,
    max_total_tokens: int | None = None,
) -> int:
    """``max_total_num_tokens`` of one replica (same on every TP rank), as SGLang computes it."""
    tokens = hostmem.estimate_max_total_num_tokens(
        gpu_memory_bytes=gpu_memory_bytes,
        mem_fraction_static=mem_fraction_static,
        weight_bytes_per_rank=profile.weight_bytes_per_rank(tp_size, pp_size),
        kv_bytes_per_token=profile.kv_bytes_per_token(tp_size),
    )
    if max_total_tokens is not None:
        tokens = min(tokens, max_total_tokens)
    return tokens


def device_pool_bytes_per_rank(profile: Profile, tokens: int, tp_size: int) -> int:
    """Bytes of one rank's device KV pool (what ``--hicache-ratio`` multiplies)."""
    return tokens * profile.kv_bytes_per_token(tp_size)
