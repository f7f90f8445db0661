"""The workload behind ``sglang_hicache(restart=True)``: a prefix set sent, backed up, sent again after a restart.

The same ``/generate`` bodies (token ids, one output token) are sent before and after the server's
in-memory tiers are emptied (a restart of the same launch, or ``/flush_cache`` on an attached server with
consent). After it, neither the GPU nor the host pool holds anything: every cached token of the second
pass must come from the storage tier, reported by 0.5.23 as ``meta_info.cached_tokens_details.storage``.
SGLang's own L3 counters (``sglang:backuped_tokens_total``, ``sglang:prefetched_tokens_total``) are read
around each step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_sglang.errors import SGLangError
from pytest_sglang.formatting import fmt
from pytest_sglang.loadgen.workloads.prefix_reuse import prefix_ids
from pytest_sglang.redaction import clean_text

if TYPE_CHECKING:
    import httpx

    from pytest_sglang.server.members import Handle

BACKUP_METRIC = "sglang:backuped_tokens_total"
PREFETCH_METRIC = "sglang:prefetched_tokens_total"
#: The backup is asynchronous in SGLang: the counter is polled until it holds still, within this deadline.
BACKUP_WAIT_S = 60.0
_POLL_S = 0.5


@dataclass(frozen=True)
class Pass:
    """One pass over the prefix set: tokens the server counted, and where the cached ones came from."""

    prompt_tokens: int = 0
    device: int = 0
    host: int = 0
    storage: int = 0
    #: Whether an answer carried ``cached_tokens_details`` with a ``storage`` key (a storage backend is on).
    storage_seen: bool = False
    backends: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        """The storage tier's share of the prompt tokens."""
        return self.storage / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass
class StorageRun:
    """The whole run: both passes and the counters read around them."""

    prompts: int
    prompt_len: int
    first: Pass = field(default_factory=Pass)
    second: Pass = field(default_factory=Pass)
    backed_up: int | None = None  # growth of sglang:backuped_tokens_total over the first pass (None: no metrics)
    prefetched: int | None = None  # growth of sglang:prefetched_tokens_total over the second pass
    backup_wait_s: float = 0.0
    restart: str = ""  # what emptied the in-memory tiers

    def shape(self) -> str:
        return (f"{self.prompts} prompts x {fmt(self.prompt_len)} tokens sent, the in-memory tiers emptied "
                f"({self.restart}), then the same {self.prompts} prompts again")


def counter(server: Handle, name: str) -> int | None:
    """Sum of counter ``name`` over ranks (0 before its first sample); None when /metrics is off."""
    try:
        samples = server.metrics().get(name, [])
    except SGLangError:
        return None
    return int(sum(s.value for s in samples))


def _body(i: int, prompt_len: int) -> dict[str, object]:
    return {"input_ids": prefix_ids(i, prompt_len),
            "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}}


def _send(client: httpx.Client, prompts: int, prompt_len: int) -> Pass:
    total, device, host, storage, seen, backends = 0, 0, 0, 0, False, set()
    for i in range(prompts):
        response = client.post("/generate", json=_body(i, prompt_len))
        if response.status_code != 200:
            raise SGLangError(f"POST /generate answered {response.status_code} during the storage-restart "
                              f"workload: {clean_text(response.text[:300])}\nFix: check the server log; the "
                              f"prompts are {fmt(prompt_len)} tokens.")
        try:
            data = response.json()
        except ValueError:
            data = None
        meta = data.get("meta_info") if isinstance(data, dict) else None
        if not isinstance(meta, dict):
            raise SGLangError("POST /generate answered 200 without a meta_info object during the storage-restart "
                              f"workload: {clean_text(response.text[:200])!r}\nFix: check that the server is SGLang.")
        total += _int(meta.get("prompt_tokens"))
        details = meta.get("cached_tokens_details")
        if isinstance(details, dict):
            device, host = device + _int(details.get("device")), host + _int(details.get("host"))
            if "storage" in details:
                seen, storage = True, storage + _int(details.get("storage"))
            if isinstance(details.get("storage_backend"), str):
                backends.add(str(details["storage_backend"]))
        else:
            device += _int(meta.get("cached_tokens"))
    return Pass(total, device, host, storage, seen, tuple(sorted(backends)))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def wait_backup(server: Handle, before: int | None, deadline_s: float = BACKUP_WAIT_S) -> tuple[int | None, float]:
    """(tokens backed up since ``before``, seconds waited): polled until the counter grew and held still."""
    started = time.monotonic()
    if before is None:
        return None, 0.0
    last = counter(server, BACKUP_METRIC)
    while time.monotonic() - started < deadline_s:
        time.sleep(_POLL_S)
        now = counter(server, BACKUP_METRIC)
        if now is not None and last is not None and now == last and now > before:
            break
        last = now
    return (None if last is None else last - before), time.monotonic() - started


def run_storage_restart(server: Handle, *, prompts: int, prompt_len: int, empty: Callable[[], str],
                        deadline_s: float = BACKUP_WAIT_S) -> StorageRun:
    """Send the prefix set, wait for the backup, ``empty()`` the in-memory tiers, send it again."""
    import httpx  # lazily: the hicache gate module is imported for its keywords alone

    run = StorageRun(prompts, prompt_len)
    timeout = httpx.Timeout(300.0, connect=10.0)
    before = counter(server, BACKUP_METRIC)
    with server.client(timeout=timeout) as client:
        run.first = _send(client, prompts, prompt_len)
    run.backed_up, run.backup_wait_s = wait_backup(server, before, deadline_s)
    run.restart = empty()
    fetched = counter(server, PREFETCH_METRIC)
    with server.client(timeout=timeout) as client:
        run.second = _send(client, prompts, prompt_len)
    after = counter(server, PREFETCH_METRIC)
    run.prefetched = after - (fetched or 0) if after is not None else None
    return run
