"""``sglang_hicache(restart=True)``: what was written to the storage tier is read back after a restart.

sglang#27619 (235 GB stored with ``--hicache-storage-backend file``, 3 % hits after a restart), sglang#26886
(the file backend never read) and sglang#33713 (backed up, loaded back 0) pass every configuration check.
This gate sends a prefix set, waits until SGLang's ``sglang:backuped_tokens_total`` holds still, restarts
the same launch on the same port (:mod:`pytest_sglang.server.restart`) and sends the same requests again.
The GPU and host pools are empty after a restart, so the cached tokens of the second pass must come from
the storage tier: ``meta_info.cached_tokens_details.storage`` (0.5.23), corroborated by the growth of
``sglang:prefetched_tokens_total``. On an attached server (with ``--sglang-allow-disruptive``) the process is
never restarted: ``POST /flush_cache`` empties the GPU and host tiers (0.5.23 keeps the storage tier), which
proves the read-back half only, and the outcome says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_sglang.formatting import fmt
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.loadgen.workloads.storage_reuse import (
    BACKUP_METRIC,
    PREFETCH_METRIC,
    StorageRun,
    run_storage_restart,
)

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle

GATE = "hicache"
#: The floor on the storage tier's share of the second pass's prompt tokens when none is given.
DEFAULT_MIN_SHARE = 0.5
PROMPTS = 8
#: 8 blocks of 64 tokens and one more: whole KV pages on any page size up to 64, so nearly all can be stored.
PROMPT_LEN = 513
_DIR_FIX = ("the storage directory must be the same after the restart: SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR, "
            "else file_storage_path in --hicache-storage-backend-extra-config JSON, else /tmp/hicache (0.5.23's "
            "HiCacheFile)")


def _unmeasured(reason: str, remedy: str) -> Check:
    return compare(GATE, "storage_hit_share", None, ">=", DEFAULT_MIN_SHARE, source=reason, remedy=remedy)


def _empty_tiers(server: Handle) -> str:
    """Restart a launched server; flush an attached one (consent was given). Returns what was done."""
    from pytest_sglang import ledger
    from pytest_sglang.server.restart import restart_in_place

    if server.mode != "attach":
        from pytest_sglang.server.handle import SGLangServer

        assert isinstance(server, SGLangServer)  # run_restart checked restartable()
        restart_in_place(server)
        return "restarted: the same launch on the same port"
    ledger.note_flush()
    with server.client() as client:
        status = client.post("/flush_cache").status_code
    if status != 200:  # 0.5.23 refuses a flush while requests run: the second pass may hit the GPU tier
        return f"attached, so not restarted: POST /flush_cache answered {status}, the tiers may not be empty"
    return "attached, so not restarted: POST /flush_cache emptied the GPU and host tiers"


def _hits(run: StorageRun) -> tuple[int | None, str]:
    if run.second.storage_seen:
        source = "after the restart: sum of meta_info.cached_tokens_details.storage"
        if run.prefetched is not None:
            source += f" ({PREFETCH_METRIC} grew by {fmt(run.prefetched)})"
        return run.second.storage, source
    if run.prefetched is not None:
        return run.prefetched, f"after the restart: growth of {PREFETCH_METRIC} (no cached_tokens_details.storage)"
    return None, ("not available: no answer carried cached_tokens_details.storage and /metrics is off; add "
                  "--enable-metrics")


def restart_checks(run: StorageRun, min_share: float) -> list[Check]:
    """The storage tier's share of the second pass, with the reason it failed when it did."""
    hits, source = _hits(run)
    share = None if hits is None or not run.second.prompt_tokens else round(hits / run.second.prompt_tokens, 3)
    if run.backed_up == 0:
        fix = (f"nothing was written to the storage tier ({BACKUP_METRIC} did not grow): check "
               "--enable-hierarchical-cache, --hicache-storage-backend and --hicache-write-policy")
    else:
        written = f"{fmt(run.backed_up)} tokens were backed up" if run.backed_up else "the tier was written"
        fix = (f"{written} and not read back after the restart (sglang#27619, #26886, #33713): {_DIR_FIX}; "
               "check --hicache-storage-prefetch-policy")
    return [compare(GATE, "storage_hit_share", share, ">=", min_share, keyword="min_storage_share",
                    source=f"{source} / {fmt(run.second.prompt_tokens)} prompt tokens", remedy=fix,
                    detail=run.shape())]


def run_restart(server: Handle, outcome: GateOutcome, min_share: float | None, *, fleet: bool) -> None:
    """The restart workload against ``server``; its checks and figures go into ``outcome``."""
    from pytest_sglang.server.restart import restartable

    floor = DEFAULT_MIN_SHARE if min_share is None else min_share
    if fleet:
        outcome.add(_unmeasured("workload not run: restart=True restarts one launched server, not a fleet",
                                "run it against a single server (--sglang-launch)"))
        return
    info = server.info()
    if info.get("enable_hierarchical_cache") is not True or not info.get("hicache_storage_backend"):
        outcome.add(_unmeasured(
            "workload not run: /server_info enable_hierarchical_cache is not true or hicache_storage_backend is "
            f"{info.get('hicache_storage_backend')!r}",
            "add --enable-hierarchical-cache --hicache-storage-backend file to the launch args"))
        return
    why = restartable(server)
    if why is not None and server.mode != "attach":
        outcome.add(_unmeasured(f"workload not run: {why}", "launch with --sglang-runner process or simulator"))
        return
    max_input = info.get("max_req_input_len")
    prompt_len = min(PROMPT_LEN, max_input - 8) if isinstance(max_input, int) else PROMPT_LEN
    run = run_storage_restart(server, prompts=PROMPTS, prompt_len=prompt_len, empty=lambda: _empty_tiers(server))
    for check in restart_checks(run, floor):
        outcome.add(check)
    second = run.second
    outcome.context["storage restart"] = run.shape()
    outcome.context["after the restart"] = (
        f"cached tokens by source: device {fmt(second.device)}, host {fmt(second.host)}, storage "
        f"{fmt(second.storage)} of {fmt(second.prompt_tokens)} prompt tokens"
        + (f" (storage_backend {', '.join(second.backends)})" if second.backends else ""))
    outcome.context["storage counters"] = (
        "not read (/metrics is off: add --enable-metrics)" if run.backed_up is None else
        f"{BACKUP_METRIC} +{fmt(run.backed_up)} before the restart (waited {run.backup_wait_s:.1f} s), "
        f"{PREFETCH_METRIC} +{fmt(run.prefetched)} after it")
