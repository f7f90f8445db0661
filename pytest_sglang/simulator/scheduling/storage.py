"""``--hicache-storage-backend file``: the simulator's L3 tier, a real directory that outlives the process.

As in SGLang 0.5.23 (``HiCacheFile``, mem_cache/hicache_storage.py) the directory is
``SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR``, else ``file_storage_path`` in the JSON of
``--hicache-storage-backend-extra-config``, else ``/tmp/hicache``. A finished request's prompt is backed up
in blocks of :data:`BLOCK` tokens, one file per block, keyed by a hash chained over the blocks before it
(the file name is the key, as SGLang's are). A later request whose prompt runs past what the device and
host tiers hold reads the following blocks back ("prefetch") and reports them as
``cached_tokens_details.storage``. So a restart of the same launch finds what the previous process wrote.

Faults (``--sim-fault``):

``l3-lost-on-restart``  every process keys its blocks with a fresh salt, so what an earlier process wrote is
                        never found again (sglang#27619: 235 GB stored, 3 % hits after a restart)
``l3-never-read``       blocks are written but the tier is never queried (sglang#26886)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path

STORAGE_KINDS = ("l3-lost-on-restart", "l3-never-read")
#: Tokens per stored block (SGLang stores per KV page; a fixed block keeps the file count small).
BLOCK = 64
DEFAULT_DIR = "/tmp/hicache"
ENV_DIR = "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR"
#: What SGLang names the file backend in ``cached_tokens_details.storage_backend`` (its class name).
BACKEND_NAME = "HiCacheFile"


def check_storage_fault(spec: str) -> str:
    """Argparse ``type=`` for these kinds: they take no argument."""
    kind, sep, _ = spec.partition(":")
    if kind not in STORAGE_KINDS:
        raise argparse.ArgumentTypeError(f"--sim-fault {spec!r}: unknown fault kind {kind!r}; choose one of "
                                         f"{', '.join(STORAGE_KINDS)}")
    if sep:
        raise argparse.ArgumentTypeError(f"--sim-fault {spec!r}: {kind} takes no argument (e.g. --sim-fault {kind})")
    return spec


def storage_dir(extra_config: str | None) -> Path:
    """Where ``HiCacheFile`` writes: the environment, then the extra config's ``file_storage_path``."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    if extra_config:
        try:
            parsed = json.loads(extra_config)
        except ValueError:
            raise SystemExit(f"--hicache-storage-backend-extra-config {extra_config!r} is not JSON; give e.g. "
                             '\'{"file_storage_path": "/data/hicache"}\'') from None
        if not isinstance(parsed, dict):
            raise SystemExit(f"--hicache-storage-backend-extra-config {extra_config!r} must be a JSON object, "
                             'e.g. \'{"file_storage_path": "/data/hicache"}\'')
        path = parsed.get("file_storage_path")
        if isinstance(path, str) and path:
            return Path(path)
    return Path(DEFAULT_DIR)


class FileTier:
    """The blocks on disk and SGLang's L3 counters (``sglang:backuped_tokens_total`` ...)."""

    def __init__(self, directory: Path, *, model: str, faults: Iterable[str] = ()) -> None:
        kinds = {spec.partition(":")[0] for spec in faults}
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        salt = secrets.token_hex(8) if "l3-lost-on-restart" in kinds else ""
        self._seed = f"{model}|{salt}".encode()
        self.read = "l3-never-read" not in kinds
        self.backuped_tokens = 0
        self.prefetched_tokens = 0
        self.prefetch_hit_tokens = 0

    def _keys(self, ids: Sequence[int]) -> list[str]:
        keys, prev = [], hashlib.sha256(self._seed).hexdigest()
        for start in range(0, len(ids) - BLOCK + 1, BLOCK):
            block = ",".join(map(str, ids[start:start + BLOCK]))
            prev = hashlib.sha256(f"{prev}|{block}".encode()).hexdigest()
            keys.append(prev)
        return keys

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.bin"

    def backup(self, ids: Sequence[int]) -> int:
        """Write the full blocks of ``ids`` not yet stored; return the tokens written."""
        written = 0
        for key in self._keys(ids):
            path = self._path(key)
            if path.exists():
                continue
            tmp = self.directory / f".{key}.{os.getpid()}.tmp"
            tmp.write_bytes(b"\0" * BLOCK)  # the KV bytes stand-in: one byte a token
            os.replace(tmp, path)  # atomic, as HiCacheFile's own write is
            written += BLOCK
        self.backuped_tokens += written
        return written

    def prefetch(self, ids: Sequence[int], cached: int) -> int:
        """Tokens of ``ids`` past ``cached`` (already on device or host) found in stored blocks."""
        if not self.read:
            return 0
        found = 0
        for key in self._keys(ids):
            if not self._path(key).exists():
                break
            found += BLOCK
        got = max(0, found - cached)
        self.prefetch_hit_tokens += got
        self.prefetched_tokens += got
        return got
