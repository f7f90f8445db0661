"""``--sglang-profile-on-failure DIR``: a failed performance gate leaves a profiler trace beside its figures.

When a throughput, SLO or baseline gate fails (``PROFILED``), the plugin takes one short window under
SGLang's profiler on the test's server (:func:`pytest_sglang.server.profile.profile_window`) into
``DIR/<test>-<n>``, and links the trace in every report: the failure message (terminal, JUnit), the user
property ``sglang.profile`` (JUnit property, JSON ``properties``) and a note in the gates table
(terminal, Markdown, HTML). An attached server is profiled only with ``--sglang-allow-disruptive``
(profiling slows it while it runs); without it, the line says so. Off unless the option is given.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_sglang.errors import SGLangError
from pytest_sglang.plugin.consent import OPTION as CONSENT_OPTION
from pytest_sglang.plugin.consent import attached
from pytest_sglang.plugin.keys import SETTINGS_KEY

if TYPE_CHECKING:
    from pytest_sglang.gates.base import GateOutcome
    from pytest_sglang.server.members import Handle

__all__ = ["PROFILED", "PROFILE_PROP", "SERVER_KEY", "profile_failed"]

PROFILE_PROP = "sglang.profile"
#: The gates whose failure is a performance question a trace can answer.
PROFILED = ("throughput", "slo", "baseline")
#: One deadline for the whole window (start, requests, stop and the trace's export).
DEADLINE_S = 120.0
SERVER_KEY: pytest.StashKey[Handle] = pytest.StashKey()
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _folder(nodeid: str) -> str:
    return _UNSAFE.sub("_", nodeid).strip("_")[:120] or "test"


def profile_failed(item: pytest.Item, failed: list[GateOutcome]) -> str | None:
    """Profile the test's server when one of ``failed`` is a performance gate: the report line, or None."""
    settings = item.config.stash.get(SETTINGS_KEY, None)
    if settings is None or settings.sglang_profile_on_failure is None:
        return None
    gates = sorted({o.gate for o in failed if o.gate in PROFILED})
    server = item.stash.get(SERVER_KEY, None)
    if not gates or server is None:
        return None
    if attached(server) and not settings.sglang_allow_disruptive:
        line = (f"NOT TAKEN: {server.server_url} was attached, and profiling slows a server while it runs. Fix: "
                f"give {CONSENT_OPTION} if the server's owner agrees")
    else:
        from pytest_sglang.server.profile import profile_window

        root = Path(settings.sglang_profile_on_failure).absolute()
        folder = root / _folder(item.nodeid)
        n = 1
        while (folder.parent / f"{folder.name}-{n}").exists():
            n += 1
        folder = folder.parent / f"{folder.name}-{n}"
        try:  # a CPU server's torch profiler is given CPU activity only
            cpu = str(server.info().get("device", "")).lower() == "cpu"
        except SGLangError:  # /server_info unread: ask for both, as SGLang's default does
            cpu = False
        window = profile_window(server.url, server.api_key, folder, deadline_s=DEADLINE_S, cpu=cpu,
                                profile_id=f"pytest-sglang-{int(time.time())}")
        line = window.line()
    text = f"profile after the failed {', '.join(gates)} gate: {line}"
    item.user_properties.append((PROFILE_PROP, text))
    return text
