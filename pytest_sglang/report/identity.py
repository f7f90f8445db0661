"""The server's identity for the reports.

SGLang version, model, runner, image, masked launch args, GPU/host facts when known, and the startup
time per phase.

Built from the :class:`pytest_sglang.server.SGLangServer` handle (attached and launched handles have
the same shape; ``startup`` is None when attached). Everything passes through ``redaction`` because
``/server_info`` and ``launch_command`` carry API keys in clear text, and text the server provides
(model name, launch command) loses its control characters before any renderer sees it.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_sglang.redaction import clean_text, scrub
from pytest_sglang.sglang.masks import scrub_argv, scrub_payload

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import Handle, SGLangFleet
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.server.phases import StartupReport


@dataclass(frozen=True)
class Phase:
    """One startup phase: seconds from the launch, and where the span came from."""

    name: str
    start_s: float
    end_s: float
    source: str = "log"

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


@dataclass
class ServerIdentity:
    sglang_version: str | None = None
    model: str | None = None
    runner: str | None = None  # attach | process | simulator | docker
    image: str | None = None  # the container image (docker runner)
    url: str | None = None
    launch_args: list[str] = field(default_factory=list)
    tp_size: int | None = None
    dp_size: int | None = None
    pp_size: int | None = None
    device: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    host: dict[str, Any] = field(default_factory=dict)
    ready_s: float | None = None
    phases: list[Phase] = field(default_factory=list)
    max_total_num_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["phases"] = [{**asdict(p), "duration_s": round(p.duration_s, 4)} for p in self.phases]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerIdentity:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "phases"}
        phases = [Phase(p["name"], float(p["start_s"]), float(p["end_s"]), p.get("source", "log"))
                  for p in data.get("phases", [])]
        return cls(**known, phases=phases)


def identify(server: Handle, runner: str | None = None) -> ServerIdentity:
    """Identity of a server handle (never raises: a report must not fail because a fact is missing).

    ``runner`` overrides the handle's mode: an xdist worker attaches to the server its controller
    launched, on the same host, and must describe it as the controller does.
    """
    from pytest_sglang.fleet.handle import fleet_of

    fleet = fleet_of(server)
    # A fleet is described by all its workers: worker 0's /server_info named its own --port and GPUs.
    info = _fleet_info(fleet) if fleet is not None else _safe_info(server)
    config = server.config
    ident = ServerIdentity(
        sglang_version=_str(info.get("version")),
        model=_str(info.get("model_path") or info.get("served_model_name")),
        runner=runner or server.mode or (config.runner if config is not None else None) or "attach",
        image=_image(config),
        url=scrub(server.url) or None,
        launch_args=_launch_args(config, info),
        tp_size=int_or_none(info.get("tp_size")), dp_size=int_or_none(info.get("dp_size")),
        pp_size=int_or_none(info.get("pp_size")),
        device=_str(info.get("device")),
        max_total_num_tokens=int_or_none(info.get("max_total_num_tokens")),
    )
    ident.gpu_model = _str(info.get("gpu_model") or info.get("gpu_name"))
    ident.gpu_count = int_or_none(info.get("gpu_count")) or (_world_size(ident) if fleet is None else None)
    if ident.runner != "attach":
        ident.host = host_facts()
    if ident.runner == "process" and ident.gpu_model is None:
        # /server_info does not name the GPU; a local process runs on this host's GPUs.
        ident.gpu_model = local_gpu_model()
    ident.phases, ident.ready_s = startup_phases(server.startup, info)
    return ident


def _safe_info(server: Handle) -> dict[str, Any]:
    # The /server_info the readiness wait read and validated moments ago: asking again cost a request
    # (and a new client) between the server's first /health 200 and the first test body.
    info = server.initial_info
    if info is None:
        try:
            info = server.info()
        except Exception:  # identity is best effort; the server tests report real errors
            return {}
    scrubbed: dict[str, Any] = scrub_payload(info)  # SGLangServer.info() scrubs; a stand-in may not
    return scrubbed


def _fleet_info(fleet: SGLangFleet) -> dict[str, Any]:
    """What every worker of ``fleet`` agrees on, as one ``/server_info``-like dict (a difference is left out).

    From each reachable worker's ``/server_info`` (read when it was probed), else the gateway's view of it.
    ``gpu_count`` is the sum of the workers' GPUs (tp x dp x pp each) when every worker's is known;
    ``launch_command`` the workers' common launch command without ``--port``/``--host`` (each has its own).
    """
    views: list[Mapping[str, Any]] = []
    for worker in fleet.workers:
        info = worker.server.initial_info if worker.server is not None else None
        facts = worker.entry.facts
        views.append(scrub_payload(info) if info else {
            "version": facts.get("version"), "model_path": facts.get("model_path") or worker.entry.model_id,
            "tp_size": facts.get("tp_size"), "dp_size": facts.get("dp_size"), "pp_size": facts.get("pp_size")})
    merged: dict[str, Any] = {}
    for key in ("version", "model_path", "tp_size", "dp_size", "pp_size", "device", "gpu_model"):
        values = {json.dumps(v.get(key), sort_keys=True) for v in views}
        if len(values) == 1 and views[0].get(key) not in (None, ""):
            merged[key] = views[0][key]
        elif key in ("version", "model_path") and len(values) > 1:  # a mixed fleet says so
            merged[key] = ", ".join(sorted({str(v[key]) for v in views if v.get(key) not in (None, "")}))
    commands = {shlex.join(_without_addresses(_argv(v.get("launch_command")))) for v in views}
    if len(commands) == 1 and (command := commands.pop()):
        merged["launch_command"] = command
    sizes = [_gpus_of(v) for v in views]
    if views and all(n is not None for n in sizes):
        merged["gpu_count"] = sum(n for n in sizes if n is not None)
    return merged


def _gpus_of(info: Mapping[str, Any]) -> int | None:
    if info.get("device") not in (None, "cuda"):
        return None
    tp = int_or_none(info.get("tp_size"))
    if tp is None:
        return None
    return tp * (int_or_none(info.get("dp_size")) or 1) * (int_or_none(info.get("pp_size")) or 1)


def _argv(command: object) -> list[str]:
    if not isinstance(command, str) or not command:
        return []
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _without_addresses(argv: list[str]) -> list[str]:
    """``argv`` without ``--port N`` / ``--host H`` (either spelling): each worker listens on its own."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--port", "--host"):
            skip = True
        elif not arg.startswith(("--port=", "--host=")):
            kept.append(arg)
    return kept


def _image(config: LaunchConfig | None) -> str | None:
    if config is None or config.runner != "docker":
        return None
    from pytest_sglang.server.options.docker import DEFAULT_IMAGE

    return (config.docker.image if config.docker is not None else None) or DEFAULT_IMAGE


def _launch_args(config: LaunchConfig | None, info: Mapping[str, Any]) -> list[str]:
    if config is not None and config.args:
        return [clean_text(a) for a in scrub_argv(config.args)]
    argv = _argv(info.get("launch_command"))
    return [clean_text(a) for a in scrub_argv(argv)] if argv else []


def _world_size(ident: ServerIdentity) -> int | None:
    if ident.device not in (None, "cuda") or ident.tp_size is None:
        return None
    return ident.tp_size * (ident.dp_size or 1) * (ident.pp_size or 1)


def host_facts() -> dict[str, Any]:
    """Facts about this host (launch modes only: an attached server runs elsewhere)."""
    facts: dict[str, Any] = {"hostname": platform.node(), "cpus": os.cpu_count(),
                             "python": platform.python_version(), "platform": platform.platform(terse=True)}
    try:
        import psutil

        facts["memory_gb"] = round(psutil.virtual_memory().total / 1e9, 1)
    except Exception:  # psutil may be unusable in odd containers
        pass
    return facts


def local_gpu_model() -> str | None:
    """The first GPU's name from ``nvidia-smi`` (None without NVIDIA GPUs or within 10 s)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in out.splitlines() if line.strip()]
    return names[0] if names else None


def startup_phases(startup: StartupReport | None, info: Mapping[str, Any]) -> tuple[list[Phase], float | None]:
    """Phase spans from our StartupReport, else the durations the server reports in ``startup_time``."""
    phases = list(_report_phases(startup)) if startup is not None else []
    ready = startup.ready_s if startup is not None else None
    if not phases:
        phases = _server_reported(info.get("startup_time"))
    if ready is None and phases:
        ready = max(p.end_s for p in phases)
    return phases, ready


def _report_phases(startup: StartupReport) -> Iterable[Phase]:
    # The last span is still open (end_s None) only if the start never finished: nothing to draw.
    for span in startup.phases:
        if span.end_s is not None:
            yield Phase(span.name, span.start_s, span.end_s, "log")


def _server_reported(startup_time: Any) -> list[Phase]:
    """SGLang's own ``startup_time`` (durations, not spans): laid end to end in its order."""
    if not isinstance(startup_time, Mapping):
        return []
    flat: list[tuple[str, float]] = []
    for key in ("load_weight", "kv_cache_allocation"):
        if _float(startup_time.get(key)):
            flat.append((key, float(startup_time[key])))
    graphs = startup_time.get("cuda_graph")
    if isinstance(graphs, Mapping):
        flat += [(f"cuda_graph.{k}", float(v)) for k, v in graphs.items() if _float(v)]
    phases, t = [], 0.0
    for name, dur in flat:
        phases.append(Phase(name, t, t + dur, "server_info"))
        t += dur
    total = _float(startup_time.get("tokenizer_e2e")) or _float(startup_time.get("scheduler_e2e"))
    if total and total > t:
        phases.append(Phase("other (tokenizer_e2e)", t, total, "server_info"))
    return phases


def _str(value: object) -> str | None:
    """A server-provided fact as text, without escape sequences (a model name is the server's word)."""
    return None if value is None or value == "" else clean_text(str(value)) or None


def int_or_none(value: object) -> int | None:
    """``value`` as an int (a number or numeric text from a payload), None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None
