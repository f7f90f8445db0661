"""Docker runner options turned into what the engine needs, without importing the docker SDK.

Everything here is pure: volume specs, sizes, GPU device requests and the full ``containers.create``
keyword set are built (and unit-tested) as plain data, so a wrong option fails at configure time on
any machine, with or without an engine or a GPU.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang.errors import ConfigError

#: The official SGLang image of the release this plugin is tested with (Docker Hub lmsysorg/sglang,
#: release tags are ``vX.Y.Z``). Never ``latest``: a gate must run the same image every time.
DEFAULT_IMAGE = "lmsysorg/sglang:v0.5.23"
#: Where SGLang's image expects the Hugging Face cache (HF_HOME of user root).
IMAGE_HF_CACHE = "/root/.cache/huggingface"

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNIT = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]+$")
_MODES = ("ro", "rw")


@dataclass(frozen=True)
class Volume:
    """One ``--sglang-volume SRC:DST[:ro]``: a host path (or named volume) mounted at ``target``."""

    source: str
    target: str
    mode: str = "rw"

    def binding(self) -> str:
        """The SDK's list form ``SRC:DST:MODE`` (a dict keyed by SRC could not mount one source twice)."""
        return f"{self.source}:{self.target}:{self.mode}"


def parse_size(text: str, *, option: str) -> int:
    """Docker's size syntax (``256m``, ``32g``, ``1.5g``, ``512MiB``; binary units) -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise ConfigError(option, text, "not a size", f"give {option} a size like 256m, 32g or 1.5g")
    value = int(float(match.group(1)) * _UNIT[match.group(2).lower()])
    if value <= 0:
        raise ConfigError(option, text, "must be greater than 0", f"give {option} a size like 256m or 32g")
    return value


def format_size(n_bytes: int) -> str:
    """The shortest exact Docker size for ``n_bytes`` (``268435456`` -> ``256m``)."""
    for unit in ("t", "g", "m", "k"):
        if n_bytes % _UNIT[unit] == 0:
            return f"{n_bytes // _UNIT[unit]}{unit}"
    return f"{n_bytes}b"


def parse_volume(spec: str) -> Volume:
    """``SRC:DST[:ro|rw]``; SRC is an absolute/``~``/``./`` host path or a named volume."""
    parts = spec.split(":")
    fix = "write --sglang-volume SRC:DST or SRC:DST:ro, e.g. --sglang-volume /data/models:/models:ro"
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise ConfigError("--sglang-volume", spec, "expected SRC:DST[:ro]", fix)
    source, target = parts[0], parts[1]
    mode = parts[2] if len(parts) == 3 else "rw"
    if mode not in _MODES:
        raise ConfigError("--sglang-volume", spec, f"mode {mode!r} is not ro or rw", fix)
    if not target.startswith("/"):
        raise ConfigError("--sglang-volume", spec, f"the container path {target!r} is not absolute", fix)
    if source.startswith(("~", ".")):
        source = str(Path(source).expanduser().resolve())
    elif not source.startswith("/") and not _VOLUME_NAME.match(source):
        raise ConfigError("--sglang-volume", spec,
                          f"{source!r} is neither an absolute path nor a volume name", fix)
    return Volume(source=source, target=target, mode=mode)


def gpu_device_requests(spec: str) -> list[dict[str, Any]]:
    """``--sglang-gpus`` -> Docker device requests (``DeviceRequest`` keyword dicts).

    ``all`` -> every GPU, ``none`` -> no request, ``N`` -> a count (as ``docker run --gpus N``),
    ``ID,ID`` or ``device=ID`` -> those device indexes or UUIDs.
    """
    text = spec.strip()
    fix = "give --sglang-gpus all, none, a count like 8, or device IDs like 0,1 (device=0 for GPU 0 only)"
    base: dict[str, Any] = {"driver": "nvidia", "capabilities": [["gpu"]]}
    if text.lower() == "all":
        return [{**base, "count": -1}]
    if text.lower() == "none":
        return []
    if text.isdigit():
        if int(text) == 0:
            raise ConfigError("--sglang-gpus", spec, "a bare number is a GPU count and 0 GPUs is 'none'", fix)
        return [{**base, "count": int(text)}]
    ids = [part.strip() for part in text.removeprefix("device=").split(",")]
    if not ids or any(not part or " " in part for part in ids):
        raise ConfigError("--sglang-gpus", spec, "not all, none, a count or a list of device IDs", fix)
    return [{**base, "device_ids": ids}]


def user_hf_cache(environ: Mapping[str, str] | None = None) -> Path:
    """The host's Hugging Face cache, as huggingface_hub resolves it (HF_HOME, XDG_CACHE_HOME, ~)."""
    env = os.environ if environ is None else environ
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "huggingface"
    return Path.home() / ".cache" / "huggingface"


def volume_bindings(specs: Sequence[str], *, hf_cache: Path | None) -> list[str]:
    """Parsed user volumes plus the HF cache at the image's path, unless the user mounted that path."""
    volumes = [parse_volume(spec) for spec in specs]
    if hf_cache is not None and all(v.target.rstrip("/") != IMAGE_HF_CACHE for v in volumes):
        volumes.append(Volume(source=str(hf_cache), target=IMAGE_HF_CACHE))
    return [v.binding() for v in volumes]
