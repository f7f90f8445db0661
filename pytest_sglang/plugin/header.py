"""What the plugin prints outside tests: the report-header lines and the ``--sglang-kill`` summary."""

from __future__ import annotations

import pytest

from pytest_sglang import redaction
from pytest_sglang.plugin.settings import Settings
from pytest_sglang.plugin.xdist import is_worker


def header_lines(config: pytest.Config, settings: Settings) -> list[str]:
    if is_worker(config):
        return []
    # Notes: which of two contradicting settings won, and settings that do nothing in this run.
    return _mode_lines(settings) + [f"sglang: {note}" for note in settings.notes]


def _mode_lines(settings: Settings) -> list[str]:
    if settings.mode == "attach" and settings.sglang_url is not None:
        # str() of the parsed URL masks its credentials; the note says which credentials are sent.
        note = settings.sglang_url.auth_note(api_key_given=settings.sglang_api_key is not None)
        return [f"sglang: mode=attach url={settings.sglang_url}", *([f"sglang: auth: {note}"] if note else [])]
    if settings.mode is None:
        return ["sglang: no server configured (--sglang-url URL or --sglang-launch ARGS)"]
    from pytest_sglang.sglang.args import display_launch  # lazy: only runs that launch read SGLang's flags

    # Masked as SGLang will read the args (--api-ke K, --api-key=K), the command's own flags included.
    args = " ".join(display_launch(settings.launch_args or (), settings.sglang_command or ()))
    log_dir = settings.sglang_log_dir or "<pytest basetemp>/sglang-logs"
    if settings.fleet:
        gateway = " ".join(settings.sglang_gateway_command or ("smg launch (else sglang_router)",))
        workers = (f"workers={settings.sglang_workers}" if settings.sglang_workers is not None else
                   f"prefill={settings.sglang_prefill or 0} decode={settings.sglang_decode or 0}")
        return [f"sglang: mode=launch runner={settings.runner} {workers} gateway={gateway} "
                "url=(free ports picked at start)", f"sglang: launch args (each worker): {args}",
                f"sglang: server logs in {log_dir}"]
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
