"""What the plugin prints outside tests: the report-header lines and the ``--sglang-kill`` summary."""

from __future__ import annotations

import pytest

from pytest_sglang import redaction
from pytest_sglang.plugin.settings import Settings


def header_lines(config: pytest.Config, settings: Settings) -> list[str]:
    if getattr(config, "workerinput", None) is not None:
        return []
    if settings.mode == "attach":
        return [f"sglang: mode=attach url={settings.sglang_url}"]
    if settings.mode is None:
        return ["sglang: no server configured (--sglang-url URL or --sglang-launch ARGS)"]
    args = " ".join(redaction.scrub_argv(settings.launch_args or ()))
    log_dir = settings.sglang_log_dir or "<pytest basetemp>/sglang-logs"
    return [f"sglang: mode=launch runner={settings.runner} url=(free port picked at start)",
            f"sglang: launch args: {args}", f"sglang: server logs in {log_dir}"]


def kill_leftovers_text() -> str:
    from pytest_sglang.server.cleanup import kill_leftovers

    stopped = kill_leftovers()
    if not stopped:
        return "sglang: no leftover servers of earlier pytest-sglang runs found"
    lines = [f"sglang: {len(stopped)} leftover(s) of earlier runs:"]
    lines += [f"  {redaction.scrub(item)}" for item in stopped]
    return "\n".join(lines)
