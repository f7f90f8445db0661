"""The Ray placement's settings (:class:`RayOptions`), checked once where they are made.

Import-light on purpose (no ``ray`` import): the plugin reads the choices and defaults at pytest
start-up, and a bad value must be reported even where Ray is not installed. Errors name the engine
fields (``ray_address``, ``ray_strategy``, ...); the plugin re-words them for its options with
:meth:`LaunchConfigError.for_option`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pytest_sglang import defaults, redaction
from pytest_sglang.errors import LaunchConfigError
from pytest_sglang.fieldtypes import wrong_type

__all__ = [
    "DEFAULT_ADDRESS", "DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_CPUS", "DEFAULT_STRATEGY", "OWNER", "STRATEGIES",
    "RayAddress", "RayOptions", "parse_address",
]

#: Ray's placement-group strategies, by Ray's own names (``ray.util.placement_group``).
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
DEFAULT_STRATEGY = defaults.DEFAULT_RAY_STRATEGY
#: ``RAY_ADDRESS`` if set, else a local Ray started for this run and stopped with it.
DEFAULT_ADDRESS = "auto"
#: CPUs reserved per server process (its HTTP front end and tokenizer; the GPUs do the work).
DEFAULT_CPUS = 1.0
#: One deadline for reaching the cluster (``ray.init`` can hang on an address that accepts TCP).
DEFAULT_CONNECT_TIMEOUT_S = 30.0
OWNER = "RayOptions"

_ADDRESS_FIX = ("give {name} auto (RAY_ADDRESS, else a local Ray for this run), the head's GCS address "
                "host:port (as `ray start --head` prints it, e.g. 10.0.0.1:6379) or ray://host:10001 (Ray Client)")
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})$")
_RESOURCE_NAME = re.compile(r"^[A-Za-z_][\w.:/-]*$")


@dataclass(frozen=True)
class RayAddress:
    """A parsed ``ray_address``: ``kind`` is ``local`` (start one), ``gcs`` (host:port) or ``client`` (ray://)."""

    kind: str
    target: str  # what ray.init receives ("" for a local start)
    host: str = ""
    port: int = 0
    shown: str = ""  # for messages: credentials masked

    def describe(self) -> str:
        return "a local Ray started for this run" if self.kind == "local" else self.shown


def parse_address(value: str, *, env_address: str | None = None) -> RayAddress:
    """Read ``ray_address`` (``auto`` resolves to ``env_address``, i.e. ``RAY_ADDRESS``, when set)."""
    text = value.strip()
    via_env = text == "auto" and bool(env_address)
    if text == "auto" and not env_address:
        return RayAddress(kind="local", target="", shown="auto")
    raw = (env_address or "").strip() if via_env else text
    shown = redaction.mask(raw) + (" (from RAY_ADDRESS)" if via_env else "")
    kind, rest = ("client", raw[len("ray://"):]) if raw.startswith("ray://") else ("gcs", raw)
    netloc = rest.rsplit("@", 1)[-1].rstrip("/")  # credentials are not Ray's, but never shown or parsed
    match = _HOST_PORT.match(netloc)
    if "://" in rest or match is None or not 0 < int(match["port"]) < 65536:
        problem = ("an http(s) address is the dashboard/jobs API, not the cluster"
                   if raw.startswith(("http://", "https://")) else "not a Ray address")
        raise LaunchConfigError(OWNER, "ray_address", shown, problem, _ADDRESS_FIX)
    return RayAddress(kind=kind, target=raw, host=match["host"].strip("[]"), port=int(match["port"]), shown=shown)


@dataclass(frozen=True, repr=False)
class RayOptions:
    """Where and how servers are placed on Ray (every field checked when made).

    ``ray_resources`` are custom Ray resources each server's bundle also asks for, e.g.
    ``(("node_b", 0.01),)`` to land on the node started with ``--resources '{"node_b": 1}'``.
    """

    ray_address: str = DEFAULT_ADDRESS
    ray_strategy: str = DEFAULT_STRATEGY
    ray_cpus: float = DEFAULT_CPUS
    ray_resources: tuple[tuple[str, float], ...] = ()
    ray_connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S

    def __post_init__(self) -> None:
        """Normalise the strategy's case and validate every field (:class:`LaunchConfigError`)."""
        wrong = wrong_type(self)
        if wrong is not None:
            raise LaunchConfigError(OWNER, wrong.name, wrong.value, wrong.problem, f"give {{name}} {wrong.expected}")
        object.__setattr__(self, "ray_resources", tuple((str(k), float(v)) for k, v in self.ray_resources))
        object.__setattr__(self, "ray_strategy", check_strategy(self.ray_strategy))
        parse_address(self.ray_address)  # syntax only; RAY_ADDRESS is read when connecting
        if not (math.isfinite(self.ray_cpus) and self.ray_cpus > 0):
            raise LaunchConfigError(OWNER, "ray_cpus", self.ray_cpus, "must be more than 0 CPUs",
                                    "give {name} the CPUs each server process holds on its node, e.g. 1")
        for name, amount in self.ray_resources:
            if not _RESOURCE_NAME.match(name) or name in ("CPU", "GPU", "memory") or not amount > 0:
                raise LaunchConfigError(
                    OWNER, "ray_resources", f"{name}={amount:g}", "not a custom Ray resource request",
                    "give {name} NAME=AMOUNT pairs of custom resources (AMOUNT > 0; CPU and GPU are "
                    "derived from ray_cpus and tp/pp/dp)")
        if not self.ray_connect_timeout_s > 0:
            raise LaunchConfigError(OWNER, "ray_connect_timeout_s", self.ray_connect_timeout_s,
                                    "must be greater than 0 seconds", "give {name} seconds, e.g. 30")


    def __repr__(self) -> str:
        """The fields, with the address's credentials masked (a ray:// URL may carry them)."""
        return (f"RayOptions(ray_address={redaction.mask(self.ray_address)!r}, ray_strategy={self.ray_strategy!r}, "
                f"ray_cpus={self.ray_cpus!r}, ray_resources={self.ray_resources!r}, "
                f"ray_connect_timeout_s={self.ray_connect_timeout_s!r})")


def check_strategy(value: str) -> str:
    """``value`` as one of Ray's placement strategies (any case), or a :class:`LaunchConfigError`."""
    strategy = value.strip().upper()
    if strategy not in STRATEGIES:
        raise LaunchConfigError(OWNER, "ray_strategy", value,
                                f"not a Ray placement strategy; expected one of {', '.join(STRATEGIES)}",
                                "give {name} PACK (default), SPREAD, STRICT_PACK or STRICT_SPREAD")
    return strategy
