"""Docker runner options turned into what the engine needs, without importing the docker SDK.

Everything here is pure: volume specs, sizes and GPU device requests are parsed (and unit-tested) as
plain data. The parsers raise ValueError saying what is wrong; :class:`~pytest_sglang.server.config.
DockerOptions` names its field, and the ``parse_*_option`` functions (the plugin's option rows) name
the option, so a typo is a usage error at configure time on any machine, with or without an engine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

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


class _DeviceRequest(TypedDict):
    driver: str
    capabilities: list[list[str]]


class DeviceRequest(_DeviceRequest, total=False):
    """The keywords of ``docker.types.DeviceRequest`` we send (a count or device IDs)."""

    count: int
    device_ids: list[str]


@dataclass(frozen=True)
class Volume:
    """One ``--sglang-volume SRC:DST[:ro]``: a host path (or named volume) mounted at ``target``."""

    source: str
    target: str
    mode: str = "rw"

    def binding(self) -> str:
        """The SDK's list form ``SRC:DST:MODE`` (a dict keyed by SRC could not mount one source twice)."""
        return f"{self.source}:{self.target}:{self.mode}"


#: Fix templates (``{name}``: how the value is set, ``DockerOptions(gpus=...)`` or ``--sglang-gpus``).
GPUS_FIX = "give {name} all, none, a count like 8, or device IDs like 0,1 (device=0 for GPU 0 only)"
SIZE_FIX = "give {name} a size like 256m, 32g or 1.5g"
VOLUME_FIX = "write {name} SRC:DST or SRC:DST:ro, e.g. /data/models:/models:ro"


def parse_size(text: str) -> int:
    """Docker's size syntax (``256m``, ``32g``, ``1.5g``, ``512MiB``; binary units) -> bytes.

    Raises ValueError saying what is wrong (the caller names the option).
    """
    match = _SIZE.match(text)
    if not match:
        raise ValueError("not a size")
    value = int(float(match.group(1)) * _UNIT[match.group(2).lower()])
    if value <= 0:
        raise ValueError("must be greater than 0")
    return value


def format_size(n_bytes: int) -> str:
    """The shortest exact Docker size for ``n_bytes`` (``268435456`` -> ``256m``)."""
    for unit in ("t", "g", "m", "k"):
        if n_bytes % _UNIT[unit] == 0:
            return f"{n_bytes // _UNIT[unit]}{unit}"
    return f"{n_bytes}b"


def parse_volume(spec: str) -> Volume:
    """``SRC:DST[:ro|rw]``; SRC is an absolute/``~``/``./`` host path or a named volume (ValueError if not)."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise ValueError("expected SRC:DST[:ro]")
    source, target = parts[0], parts[1]
    mode = parts[2] if len(parts) == 3 else "rw"
    if mode not in _MODES:
        raise ValueError(f"mode {mode!r} is not ro or rw")
    if not target.startswith("/"):
        raise ValueError(f"the container path {target!r} is not absolute")
    if source.startswith(("~", ".")):
        source = str(Path(source).expanduser().resolve())
    elif not source.startswith("/") and not _VOLUME_NAME.match(source):
        raise ValueError(f"{source!r} is neither an absolute path nor a volume name")
    return Volume(source=source, target=target, mode=mode)


def gpu_device_requests(spec: str) -> list[DeviceRequest]:
    """``--sglang-gpus`` -> Docker device requests (``DeviceRequest`` keyword dicts; ValueError if malformed).

    ``all`` -> every GPU, ``none`` -> no request, ``N`` -> a count (as ``docker run --gpus N``),
    ``ID,ID`` or ``device=ID`` -> those device indexes or UUIDs.
    """
    text = spec.strip()
    if text.lower() == "all":
        return [{"driver": "nvidia", "capabilities": [["gpu"]], "count": -1}]
    if text.lower() == "none":
        return []
    if text.isdigit():
        if int(text) == 0:
            raise ValueError("a bare number is a GPU count and 0 GPUs is 'none'")
        return [{"driver": "nvidia", "capabilities": [["gpu"]], "count": int(text)}]
    ids = [part.strip() for part in text.removeprefix("device=").split(",")]
    if not ids or any(not part or " " in part for part in ids):
        raise ValueError("not all, none, a count or a list of device IDs")
    return [{"driver": "nvidia", "capabilities": [["gpu"]], "device_ids": ids}]


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


# ---- the plugin's option rows (``parse=`` of ``--sglang-gpus`` ...): checked at configure time ----
def _option(option: str, fix: str, check: Callable[[str], object]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            check(text)
        except ValueError as exc:
            raise ConfigError(option, text, str(exc), fix.format(name=option)) from None
        return text

    parse.__doc__ = f"Check a {option} value (the text is kept; the engine turns it into SDK keywords)."
    return parse


parse_gpus_option = _option("--sglang-gpus", GPUS_FIX, gpu_device_requests)
parse_shm_size_option = _option("--sglang-shm-size", SIZE_FIX, parse_size)
parse_memory_option = _option("--sglang-docker-memory", SIZE_FIX, parse_size)
parse_volume_option = _option("--sglang-volume", VOLUME_FIX, parse_volume)
