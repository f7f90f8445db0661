"""``gsm8k`` and ``mmlu`` from the Hugging Face hub when no local file is given, and the hub's parquet layout.

The hub serves both datasets as parquet: ``openai/gsm8k`` ``main/test-00000-of-00001.parquet``
(columns ``question``, ``answer``) and ``cais/mmlu`` ``all/test-00000-of-00001.parquet`` plus
``all/dev-00000-of-00001.parquet`` for the few-shot rows (``question``, ``subject``, ``choices``,
``answer`` as an index). Where a file comes from, in order:

1. the hub cache (``HF_HUB_CACHE``, ``~/.cache/huggingface/hub``): no network at all;
2. with ``HF_HUB_OFFLINE=1``: nowhere else, so a clear error;
3. the hub (``HF_ENDPOINT``): one quick probe first (a machine without a route fails in
   milliseconds, not after huggingface_hub's 5 retries), a size bound, then ``hf_hub_download``
   within what is left of the deadline.

Never a silent fallback: when the hub cannot be used, :class:`DataUnavailable` names the task, why,
and the fix (a local file, ``--sglang-eval-data PATH`` / ``eval --data PATH``, with its layout).
Needs the ``eval`` extra (``huggingface_hub``, ``pyarrow``), imported only when used.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pytest_sglang.errors import ConfigError

#: Seconds a hub load may take in all (probe + download) unless the caller says otherwise.
HUB_TIMEOUT_S = 120.0
#: Bytes a hub or parquet file may have at most (gsm8k's test split is ~0.4 MB, mmlu's ~3.5 MB).
MAX_PARQUET_BYTES = 64 * 1024 * 1024
INSTALL = "pip install 'pytest-sglang[eval]'"


@dataclass(frozen=True)
class HubFile:
    repo_id: str
    filename: str
    revision: str = "main"


#: The hub files of each task: the scored split first, then the few-shot split (if any).
FILES: dict[str, tuple[HubFile, ...]] = {
    "gsm8k": (HubFile("openai/gsm8k", "main/test-00000-of-00001.parquet"),),
    "mmlu": (HubFile("cais/mmlu", "all/test-00000-of-00001.parquet"),
             HubFile("cais/mmlu", "all/dev-00000-of-00001.parquet")),
}
#: What a local file must look like instead (the fix of every error here).
LAYOUTS = {
    "gsm8k": 'gsm8k JSONL ({"question": ..., "answer": "... #### 42"}) or the hub\'s test-00000-of-00001.parquet',
    "mmlu": "mmlu CSV (question,A,B,C,D,answer), its data/ folder of *_test.csv, JSONL, or the hub's "
            "all/test-00000-of-00001.parquet",
}


class DataUnavailable(ConfigError):
    """A task's data could not be loaded from the hub (and no local file was given)."""


@dataclass(frozen=True)
class HubData:
    """Local paths of a task's hub files (scored split, few-shot split) and where they came from."""

    paths: tuple[Path, ...]
    source: str


def _error(task: str, why: str) -> DataUnavailable:
    return DataUnavailable("task", task, f"has no local data file and the Hugging Face hub is unreachable: {why}",
                           f"pass a local file: --sglang-eval-data PATH (eval --data PATH), {LAYOUTS[task]}; or let "
                           "this machine reach the hub (HF_ENDPOINT) and unset HF_HUB_OFFLINE")


def require(name: str, task: str) -> None:
    """Fail with the install hint when the optional ``name`` is missing (``eval`` extra).

    ``find_spec`` checks presence only: a module that is present but broken still fails as itself on import.
    """
    if importlib.util.find_spec(name) is None:
        raise ConfigError("task", task, f"needs {name} to load its data from the Hugging Face hub or a parquet file",
                          f"{INSTALL}, or pass a local file: --sglang-eval-data PATH (eval --data PATH), "
                          f"{LAYOUTS.get(task, 'JSONL')}")


def fetch(task: str, timeout_s: float = HUB_TIMEOUT_S) -> HubData:
    """Local paths of ``task``'s hub files: from the hub cache, else downloaded within ``timeout_s``.

    Raises:
        DataUnavailable: offline, unreachable, too large, or not done within ``timeout_s``.
    """
    require("huggingface_hub", task)
    deadline = time.monotonic() + timeout_s
    paths = [_one(task, f, deadline, timeout_s) for f in FILES[task]]
    commit = _commit_of(paths[0])
    first = FILES[task][0]
    source = f"hf://datasets/{first.repo_id}@{commit or first.revision}/{first.filename}"
    return HubData(tuple(paths), source)


def _one(task: str, f: HubFile, deadline: float, timeout_s: float) -> Path:
    import huggingface_hub as hub  # the eval extra, checked by require()

    cached = hub.try_to_load_from_cache(f.repo_id, f.filename, revision=f.revision, repo_type="dataset")
    if isinstance(cached, str):
        return _bounded(Path(cached), task)
    where = f"{f.repo_id}/{f.filename}"
    if hub.constants.HF_HUB_OFFLINE:
        raise _error(task, f"HF_HUB_OFFLINE is set and {where} is not in the hub cache {hub.constants.HF_HUB_CACHE}")
    url = hub.hf_hub_url(f.repo_id, f.filename, repo_type="dataset", revision=f.revision)
    _probe(task, url, deadline)
    return _bounded(_download(task, f, deadline, timeout_s), task)


def _probe(task: str, url: str, deadline: float) -> None:
    """One HEAD, no retries: reachable, the file exists, and its size is within the bound."""
    try:
        # Public datasets: no token. No redirects: the CDN answer is not needed to know the size.
        resp = httpx.head(url, follow_redirects=False, timeout=max(0.1, min(10.0, deadline - time.monotonic())))
    except httpx.HTTPError as exc:
        raise _error(task, f"HEAD {url} failed ({type(exc).__name__}: {exc})") from None
    if resp.status_code >= 400:
        raise _error(task, f"HEAD {url} answered HTTP {resp.status_code}")
    size = resp.headers.get("x-linked-size") or resp.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > MAX_PARQUET_BYTES:
        raise _error(task, f"{url} has {int(size)} bytes, more than the {MAX_PARQUET_BYTES // 2**20} MiB bound")


def _download(task: str, f: HubFile, deadline: float, timeout_s: float) -> Path:
    """``hf_hub_download`` in a daemon thread, so the deadline holds even when a read stalls."""
    import huggingface_hub as hub

    out: list[object] = []

    def run() -> None:
        try:
            out.append(hub.hf_hub_download(f.repo_id, f.filename, repo_type="dataset", revision=f.revision,
                                           etag_timeout=10))
        except Exception as exc:  # reported below, in the caller's thread
            out.append(exc)

    worker = threading.Thread(target=run, name=f"hub-{task}", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if not out:
        raise _error(task, f"downloading {f.repo_id}/{f.filename} did not finish within hub_timeout_s="
                           f"{timeout_s:g} (eval --hub-timeout)")
    if isinstance(out[0], BaseException):
        raise _error(task, f"{type(out[0]).__name__}: {out[0]}")
    return Path(str(out[0]))


def _bounded(path: Path, task: str) -> Path:
    if path.stat().st_size > MAX_PARQUET_BYTES:
        raise _error(task, f"{path} is larger than {MAX_PARQUET_BYTES // 2**20} MiB")
    return path


def _commit_of(path: Path) -> str | None:
    """The commit in a hub-cache path (``.../snapshots/<commit>/...``), or None."""
    parts = path.parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-1] else None


def read_parquet(path: Path, columns: tuple[str, ...], task: str) -> list[dict[str, Any]]:
    """The rows of a parquet file (only ``columns``), as dicts; bad files are a ConfigError naming them."""
    require("pyarrow", task)
    import pyarrow.parquet as pq  # type: ignore[import-untyped]  # pyarrow ships no type information

    try:
        if path.stat().st_size > MAX_PARQUET_BYTES:
            raise ConfigError(f"{task} data", str(path), f"is larger than {MAX_PARQUET_BYTES // 2**20} MiB",
                              "pass the dataset's test split, not a whole corpus")
        table = pq.read_table(path, columns=list(columns))
    except (OSError, ValueError, KeyError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ConfigError(f"{task} data", str(path), f"cannot be read as parquet with columns {', '.join(columns)} "
                          f"({str(exc)[:200]})", f"pass {LAYOUTS[task]}") from None
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows
