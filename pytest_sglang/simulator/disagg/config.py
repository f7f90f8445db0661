"""Prefill-decode disaggregation settings of one simulator launch, resolved as SGLang 0.5.23 resolves them.

The flags are SGLang's (``--disaggregation-mode``, ``--disaggregation-bootstrap-port``,
``--disaggregation-transfer-backend``, ``--disaggregation-enable-kv-checksum``...); the timeouts are
its environment variables (``srt/environ.py``), multiplied by ``--sim-time-scale`` like every other
simulated duration. What 0.5.23 changes in ``/server_info`` for a PD worker is in
:func:`overlay_server_info` (``srt/arg_groups/pd_disaggregation_hook.py``, ``serving_hook.py``,
``mem_cache/kv_cache_builder.py``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.simulator.logs import Logger

#: The bootstrap host the health checks and warmups use: a transfer that moves no KV (``disaggregation/utils.py``).
FAKE_BOOTSTRAP_HOST = "2.2.2.2"
DEFAULT_BOOTSTRAP_PORT = 8998
#: Transfer bandwidth by backend, bytes/s (RDMA for mooncake/nixl/mori/ascend; the TCP path is ~10x slower).
BANDWIDTH = {"mooncake": 25e9, "nixl": 25e9, "mori": 25e9, "ascend": 25e9, "mooncake_tcp": 2.5e9, "fake": 0.0}
#: Fixed cost of one KV transfer (handshake, completion notification), seconds.
TRANSFER_BASE_S = 0.0005

_REFUSED_FAKE = """Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "<frozen runpy>", line 88, in _run_code
  File "{root}/sglang/launch_server.py", line 84, in <module>
    run_server(server_args)
  File "{root}/sglang/launch_server.py", line 29, in run_server
    server_args.resolve_once()
  File "{root}/sglang/srt/server_args.py", line 277, in resolve_once
    run_resolution_pipeline(self)
  File "{root}/sglang/srt/arg_groups/pipeline.py", line 147, in run_resolution_pipeline
    run_hook(handle_pd_disaggregation, server_args)
  File "{root}/sglang/srt/arg_groups/resolution_hooks.py", line 139, in run_hook
    step(server_args)
  File "{root}/sglang/srt/arg_groups/pd_disaggregation_hook.py", line 146, in handle_pd_disaggregation
    assert cfg.disaggregation_transfer_backend != "fake", (
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AssertionError: Prefill server does not support 'fake' as the transfer backend
"""
_ROOT = "/usr/local/lib/python3.12/dist-packages"


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


@dataclass(frozen=True)
class PDConfig:
    """One worker's disaggregation settings (``mode`` "null" for a regular server)."""

    mode: str = "null"
    #: the backend as given (``mooncake_tcp`` stays visible here; /server_info reports ``mooncake``)
    backend: str = "mooncake"
    bootstrap_port: int = DEFAULT_BOOTSTRAP_PORT
    kv_checksum: bool = False
    decode_radix: bool = False
    retraction_backup: str | None = None
    page_size: int = 1
    kv_cache_dtype: str = "auto"
    #: the seconds of SGLang's timeouts (not yet scaled)
    bootstrap_timeout_s: float = 300.0
    waiting_timeout_s: float = 300.0
    heartbeat_interval_s: float = 5.0
    heartbeat_max_failure: int = 2
    #: SGLANG_TEST_DISAGG_FAILURE_PROB and SGLANG_TEST_DISAGG_KV_CHECKSUM_MISMATCH_PROB
    env_failure_prob: float = 0.0
    env_checksum_mismatch_prob: float = 0.0

    @property
    def enabled(self) -> bool:
        return self.mode in ("prefill", "decode")

    @property
    def resolved_backend(self) -> str:
        """``mooncake_tcp`` is mooncake with MC_FORCE_TCP=1 (``pd_disaggregation_hook.py``)."""
        return "mooncake" if self.backend == "mooncake_tcp" else self.backend

    @property
    def bandwidth(self) -> float:
        return BANDWIDTH.get(self.backend, BANDWIDTH["mooncake"])


def resolve_pd(args: LaunchArgs) -> PDConfig:
    """The PD settings of a launch, with 0.5.23's environment timeouts."""
    extra = args.passthrough
    backup = extra.get("disaggregation_decode_retraction_backup")
    return PDConfig(
        mode=str(extra.get("disaggregation_mode") or "null"),
        backend=str(extra.get("disaggregation_transfer_backend") or "mooncake"),
        bootstrap_port=int(str(extra.get("disaggregation_bootstrap_port", DEFAULT_BOOTSTRAP_PORT))),
        kv_checksum=bool(extra.get("disaggregation_enable_kv_checksum")),
        decode_radix=bool(extra.get("disaggregation_decode_enable_radix_cache")),
        retraction_backup=None if backup is None else str(backup),
        page_size=args.page_size or 1,
        kv_cache_dtype=args.kv_cache_dtype,
        bootstrap_timeout_s=_env_float("SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT", 300.0),
        waiting_timeout_s=_env_float("SGLANG_DISAGGREGATION_WAITING_TIMEOUT", 300.0),
        # 0.5.23 floors these: at least 2 s between heartbeats, at least 1 failure
        heartbeat_interval_s=max(_env_float("SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL", 5.0), 2.0),
        heartbeat_max_failure=max(int(_env_float("SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE", 2)), 1),
        env_failure_prob=_env_float("SGLANG_TEST_DISAGG_FAILURE_PROB", 0.0),
        env_checksum_mismatch_prob=_env_float("SGLANG_TEST_DISAGG_KV_CHECKSUM_MISMATCH_PROB", 0.0),
    )


def refuse_launch(args: LaunchArgs) -> None:
    """Exit 1 with 0.5.23's traceback where its argument resolution refuses a PD launch.

    A prefill server with the ``fake`` backend fails an assert in ``handle_pd_disaggregation``
    before anything starts (recorded on the real 0.5.23 CPU build).
    """
    pd = resolve_pd(args)
    if pd.mode == "prefill" and pd.backend == "fake":
        sys.stderr.write(_REFUSED_FAKE.format(root=_ROOT))
        sys.stderr.flush()
        sys.exit(1)


def startup_lines(pd: PDConfig) -> list[str]:
    """The PD lines 0.5.23 logs while it resolves its arguments (before ``server_args=``)."""
    out = []
    if pd.backend == "mooncake_tcp":
        out.append("disaggregation transfer backend 'mooncake_tcp' -> mooncake with MC_FORCE_TCP=1 "
                   "(TCP transport, no RDMA)")
    if pd.enabled and pd.resolved_backend == "mooncake":
        out.append("No IB devices specified for Mooncake backend, falling back to auto discovery.")
    if pd.mode == "decode":
        out.append("Radix cache is disabled for decode server" if not pd.decode_radix
                   else "EXPERIMENTAL: Radix cache is enabled for decode server")
    return out


def decode_extra_slots(max_running_requests: int | None, dp_size: int) -> int:
    """``disaggregation_decode_extra_slots`` as a decode server resolves it when unset."""
    if max_running_requests is None:
        return 0
    per_worker = max(1, max_running_requests // max(1, dp_size))
    return per_worker * 2 if per_worker <= 32 else 0


def overlay_server_info(pd: PDConfig, args: LaunchArgs, body: dict[str, Any]) -> None:
    """Apply 0.5.23's PD resolutions to a ``/server_info`` body (top level and every internal state)."""
    if not pd.enabled:
        return
    resolved: dict[str, Any] = {
        "disaggregation_mode": pd.mode,
        "disaggregation_transfer_backend": pd.resolved_backend,
        "disaggregation_bootstrap_port": pd.bootstrap_port,
        "disaggregation_enable_kv_checksum": pd.kv_checksum,
    }
    if pd.backend == "mooncake_tcp":
        resolved["disaggregation_ib_device"] = None
    if pd.mode == "prefill":
        if args.passthrough.get("load_balance_method") in (None, "auto"):
            resolved["load_balance_method"] = "follow_bootstrap_room"
    else:
        resolved["disable_radix_cache"] = not pd.decode_radix
        if args.passthrough.get("disaggregation_decode_extra_slots") is None:
            resolved["disaggregation_decode_extra_slots"] = decode_extra_slots(args.max_running_requests, args.dp_size)
    body.update(resolved)
    # The scheduler resolves the retraction backup from its KV pool: a GPU decode server picks host_pool.
    backup = pd.retraction_backup or ("host_pool" if pd.mode == "decode" and not pd.decode_radix else "cpu_tensor")
    body["disaggregation_decode_retraction_backup"] = pd.retraction_backup
    for state in body.get("internal_states", []):
        state.update(resolved)
        state["disaggregation_decode_retraction_backup"] = backup


def before_startup(args: LaunchArgs, log: Logger) -> None:
    """Refuse what 0.5.23 refuses at argument resolution, then log its PD resolution lines."""
    refuse_launch(args)
    for line in startup_lines(resolve_pd(args)):
        log.info(line)
