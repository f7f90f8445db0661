"""Errors raised by pytest-sglang.

Every error carries the object it is about and builds its message from five parts: what failed,
where, the facts, evidence (a log tail, the last probe) and the fix (exact option names)::

    SGLangError
    ├── ConfigError            bad option, marker or launch-arg value (raised as pytest.UsageError
    │   │                      by the plugin); names the option, the value and the fix
    │   └── DataUnavailable    an accuracy task has no local data and the hub cannot be reached
    │                          (accuracy/hub.py)
    ├── PreflightError         the launch would not fit this host (hicache host pools); nothing started
    ├── ServerStartError       the server did not become ready
    │   ├── ServerExited       the process/container died before ready: exit code or signal, phase, log tail
    │   └── ServerNotReady     the deadline passed: phase reached, last probe, log tail
    ├── ServerUnavailable      attach mode: nothing answers at --sglang-url, or it answers wrongly
    ├── SchemaMismatch         a payload does not match its schema: endpoint, schema $id, errors by JSON path
    ├── DockerError            the Docker engine, image or container could not be used
    ├── LoadGenError           the load could not be generated at all (not a threshold miss)
    └── EvalRunError           an accuracy run gave no verdict (sgl-eval failed or ran out of time;
                               accuracy/verdict.py), with its log path

Threshold misses (capacity, hicache, throughput, SLO, fleet, failover, accuracy, golden, baseline) are
``AssertionError``: a test FAILURE, never an ERROR.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    from pytest_sglang.exits import ExitStatus, FatalLine


class SGLangError(Exception):
    """Base class of every pytest-sglang error."""


class ConfigError(SGLangError, ValueError):
    """A setting, marker keyword or launch argument has a bad value."""

    def __init__(self, source: str, value: object, problem: str, fix: str) -> None:
        """Keep the parts so that callers can re-word the error (e.g. for another option name)."""
        self.source = source
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{source}={value!r}: {problem}. Fix: {fix}")


class LaunchConfigError(ConfigError):
    """A bad field of an engine config (``LaunchConfig``, ``RayOptions``, ``FleetSpec``...), in its words.

    ``fix`` is a template: ``{name}`` is how the field is set, ``LaunchConfig(runner=...)`` in the engine and
    ``--sglang-runner`` once the plugin re-words it with :meth:`for_option`.
    """

    def __init__(self, owner: str, name: str, value: object, problem: str, fix: str) -> None:
        """Keep the field and the fix template so that :meth:`for_option` can re-word it."""
        self.owner = owner
        self.field = name
        self.fix_template = fix
        super().__init__(f"{owner}.{name}", value, problem, fix.format(name=f"{owner}({name}=...)"))

    def for_option(self, option: str) -> ConfigError:
        """The same error for a plugin option (``--sglang-runner``) that set this field."""
        return ConfigError(option, self.value, self.problem, self.fix_template.format(name=option))

    def __reduce__(self) -> tuple[type[LaunchConfigError], tuple[str, str, object, str, str]]:
        """Pickle by the constructor's arguments (errors cross xdist and process boundaries)."""
        return type(self), (self.owner, self.field, self.value, self.problem, self.fix_template)


class PreflightError(SGLangError):
    """The launch was refused before starting anything (e.g. hicache host pools do not fit)."""

    def __init__(self, message: str, *, fix: str) -> None:
        """Keep ``fix`` and append it to the message as a ``Fix:`` line."""
        self.fix = fix
        super().__init__(f"{message}\nFix: {fix}")


class ServerStartError(SGLangError):
    """The server did not become ready. Subclasses say why."""


class ServerExited(ServerStartError):
    """The server process (or container) exited before it was ready."""

    exit_status: ExitStatus | None = None
    phase: str | None = None  # the startup phase reached, from the log
    fatal_line: FatalLine | None = None  # the explained fatal line of the log, if one matched
    log_path: Path | None = None


class ServerNotReady(ServerStartError):
    """The startup deadline passed while the server was still not ready."""

    phase: str | None = None
    last_probe: str | None = None  # e.g. "GET /health -> 503"


class ServerUnavailable(SGLangError):
    """An attached server (``--sglang-url``) does not answer, or answers wrongly."""

    last_probe: str | None = None


class SchemaMismatch(SGLangError):
    """A server payload does not match its JSON Schema."""

    def __init__(self, endpoint: str, schema_id: str, headline: str, errors: Sequence[str]) -> None:
        """Keep the endpoint, schema and every violation; the message lists them and the fix."""
        self.endpoint = endpoint
        self.schema_id = schema_id
        self.headline = headline
        self.errors = list(errors)
        lines = [f"{endpoint} does not match schema {schema_id}: {headline}"]
        lines += [f"  {e}" for e in self.errors]
        lines.append("Fix: check the SGLang version, or run with --sglang-validate=warn to continue anyway.")
        super().__init__("\n".join(lines))


class DockerError(SGLangError):
    """The Docker engine, the image or the container could not be used."""


class LoadGenError(SGLangError):
    """The load generator could not run the load at all (bad spec, server unreachable)."""


__all__ = [
    "ConfigError",
    "DockerError",
    "LaunchConfigError",
    "LoadGenError",
    "PreflightError",
    "SGLangError",
    "SchemaMismatch",
    "ServerExited",
    "ServerNotReady",
    "ServerStartError",
    "ServerUnavailable",
]
