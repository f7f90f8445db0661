"""What a gateway says about its fleet: ``GET /workers`` and ``GET /readiness``, parsed into types.

Both of SGLang's gateways answer ``GET /workers`` with ``{"workers": [...], "total": N, "stats": {...}}``.
They differ in where a worker's launch facts live: sglang-router 0.3.x puts them in ``metadata``
(with ``disaggregation_mode``), smg 1.x in ``labels`` (with the worker's SGLang ``version``) and adds
``runtime_type``, ``status`` and ``engine_load``. That difference tells the flavour of an attached
gateway (neither exposes its own version over HTTP). A plain SGLang server has no ``/workers``
route (404), which is how :func:`discover` tells a server from a gateway.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

import httpx

from pytest_sglang import redaction
from pytest_sglang.errors import ServerUnavailable
from pytest_sglang.server.client import deadline_in
from pytest_sglang.server.readiness import excerpt
from pytest_sglang.server.url import mask_userinfo

__all__ = ["FIX_DUPLICATE", "ROLES", "Discovery", "GatewayFlavor", "Readiness", "WorkerEntry", "discover",
           "gateway_version", "parse_readiness", "parse_workers", "refuse_duplicates", "worker_key"]

GatewayFlavor = Literal["smg", "sglang-router"]
Role = Literal["regular", "prefill", "decode"]
ROLES: tuple[Role, ...] = ("regular", "prefill", "decode")
_ROLE_OF: dict[str, Role] = {r: r for r in ROLES}
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Names of this machine's loopback interface that one server bound to 0.0.0.0 answers under alike.
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "localhost.localdomain", "0.0.0.0"})


def worker_key(url: str) -> str:
    """One spelling per endpoint: ``HTTP://LocalHost:80/`` and ``http://127.0.0.1`` give the same key.

    A gateway may list one worker under two spellings (real smg 1.13.0 keeps each ``--worker-urls``
    text as given); counted twice, one 4,096-token worker passed ``min_fleet_total_tokens=10000``.
    Scheme and host are lower-cased, credentials dropped, a default port spelled out, ``localhost``
    read as 127.0.0.1, IP literals written canonically (``::ffff:127.0.0.1`` is 127.0.0.1), and a
    trailing slash dropped. Spellings this cannot see through (a DNS alias) are caught by the
    workers' own ``/server_info`` (:mod:`.probe`).
    """
    try:
        parts = urlsplit(url.strip())
        scheme = (parts.scheme or "http").lower()
        host = (parts.hostname or "").lower()
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        return url.strip().rstrip("/").lower()
    host = "127.0.0.1" if host in _LOOPBACK_NAMES else _canonical_ip(host)
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def _canonical_ip(host: str) -> str:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host.rstrip(".")
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)


@dataclass(frozen=True)
class WorkerEntry:
    """One worker as the gateway lists it (the gateway's view, not the worker's own)."""

    url: str
    role: Role
    is_healthy: bool
    load: int | None = None
    model_id: str | None = None
    #: The worker's launch facts as the gateway reports them (text values: ``tp_size``, ``dp_size``, ...).
    facts: Mapping[str, str] = field(default_factory=dict)
    bootstrap_port: int | None = None

    def fact(self, name: str) -> str | None:
        """One launch fact (``tp_size``, ``model_path``, ``version`` on smg), or None."""
        return self.facts.get(name)

    @property
    def key(self) -> str:
        """The endpoint whatever the spelling (:func:`worker_key`)."""
        return worker_key(self.url)


@dataclass(frozen=True)
class Discovery:
    """The gateway's worker list, as read once."""

    flavor: GatewayFlavor
    workers: tuple[WorkerEntry, ...]

    @property
    def healthy(self) -> tuple[WorkerEntry, ...]:
        """The workers the gateway calls healthy."""
        return tuple(w for w in self.workers if w.is_healthy)

    def distinct_healthy(self) -> int:
        """How many endpoints the healthy entries are (one worker listed twice counts once)."""
        return len({w.key for w in self.healthy})

    def duplicates(self) -> list[tuple[WorkerEntry, ...]]:
        """The groups of entries that spell one endpoint (each group lists 2+ entries)."""
        groups: dict[str, list[WorkerEntry]] = {}
        for worker in self.workers:
            groups.setdefault(worker.key, []).append(worker)
        return [tuple(g) for g in groups.values() if len(g) > 1]


@dataclass(frozen=True)
class Readiness:
    """``GET /readiness``: 200 with the counts, or 503 with the reason."""

    status: int
    healthy_workers: int | None
    total_workers: int | None
    reason: str = ""

    @property
    def ready(self) -> bool:
        """True when the gateway says it can serve (200)."""
        return self.status == 200

    def describe(self) -> str:
        """``GET /readiness -> 200 (2/2 workers healthy)`` style text."""
        counts = (f" ({self.healthy_workers}/{self.total_workers} workers healthy)"
                  if self.healthy_workers is not None and self.total_workers is not None else "")
        reason = f": {self.reason}" if self.reason and not counts else ""
        return f"GET /readiness -> {self.status}{counts}{reason}"


def _text_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _entry(raw: Mapping[str, object], where: str) -> WorkerEntry:
    url = raw.get("url")
    if not isinstance(url, str) or not url:
        raise ServerUnavailable(f"{where}: a worker without a 'url': {excerpt(json.dumps(raw))!r}\n"
                                "Fix: point --sglang-url at SGLang's gateway (smg or sglang-router).")
    role = str(raw.get("worker_type", "regular")).lower()
    facts = {**_text_map(raw.get("metadata")), **_text_map(raw.get("labels"))}
    model_id = raw.get("model_id")
    return WorkerEntry(
        url=url.rstrip("/"), role=_ROLE_OF.get(role, "regular"), is_healthy=raw.get("is_healthy") is True,
        load=_int(raw.get("load")), model_id=model_id if isinstance(model_id, str) else None,
        facts=facts, bootstrap_port=_int(raw.get("bootstrap_port")))


FIX_DUPLICATE = ("Fix: register each worker with the gateway once (remove the extra spelling: smg and sglang-router "
                  "take DELETE /workers/<url>), then run again; the fleet gates count a worker once or not at all.")


def refuse_duplicates(discovery: Discovery) -> None:
    """Raise when the gateway lists one endpoint under two spellings (:func:`~.discovery.worker_key`).

    Refused, not merged: the gateway itself routes to such a worker twice as often, so every fleet
    figure (capacity, balance, min_healthy) would describe a fleet that does not exist.
    """
    groups = discovery.duplicates()
    if groups:
        lines = [f"  {' and '.join(mask_userinfo(w.url) for w in group)} are one endpoint ({group[0].key})"
                 for group in groups]
        raise ServerUnavailable(redaction.scrub(
            f"the gateway lists {sum(len(g) - 1 for g in groups)} worker(s) twice under different URLs:\n"
            + "\n".join(lines) + "\n" + FIX_DUPLICATE))


def parse_workers(payload: object, where: str = "GET /workers") -> Discovery | None:
    """The fleet in a ``/workers`` body, or None when the body is not a gateway's worker list."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("workers"), list):
        return None
    raws = [w for w in payload["workers"] if isinstance(w, Mapping)]
    workers = tuple(sorted((_entry(w, where) for w in raws), key=lambda w: (ROLES.index(w.role), w.url)))
    smg = any("labels" in w or "runtime_type" in w for w in raws)
    return Discovery(flavor="smg" if smg else "sglang-router", workers=workers)


def parse_readiness(response: httpx.Response) -> Readiness:
    """``/readiness`` into counts; a body that is not JSON keeps its excerpt as the reason."""
    try:
        body = json.loads(response.text)
    except ValueError:
        return Readiness(response.status_code, None, None, excerpt(response.text, 120))
    if not isinstance(body, Mapping):
        return Readiness(response.status_code, None, None, excerpt(response.text, 120))
    return Readiness(response.status_code, _int(body.get("healthy_workers")), _int(body.get("total_workers")),
                     str(body.get("reason") or body.get("status") or ""))


def gateway_version(client: httpx.Client, timeout_s: float = 5.0) -> str | None:
    """The gateway's own version where it says it: smg's ``GET /get_loads`` carries ``"version": "smg-1.13.0"``."""
    try:
        response = client.get("/get_loads", timeout=timeout_s, extensions=deadline_in(timeout_s))
        body = response.json() if response.status_code == 200 and len(response.content) < 1 << 20 else None
    except (httpx.HTTPError, ValueError):
        return None
    version = body.get("version") if isinstance(body, Mapping) else None
    if isinstance(version, str) and version.startswith("smg-"):
        return version.removeprefix("smg-")
    return None


def discover(client: httpx.Client, timeout_s: float = 10.0) -> Discovery | None:
    """Ask ``GET /workers``: the fleet behind a gateway, or None for a plain SGLang server (404)."""
    try:
        response = client.get("/workers", timeout=timeout_s, extensions=deadline_in(timeout_s))
    except httpx.HTTPError:
        return None  # the server's own readiness wait says what is wrong with it
    if response.status_code != 200:
        return None
    try:
        payload = json.loads(response.text)
    except ValueError:
        return None
    return parse_workers(payload)
