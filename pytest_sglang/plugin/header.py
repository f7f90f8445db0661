"""What the plugin prints outside tests: the report-header lines and the ``--sglang-kill`` summary."""

from __future__ import annotations

import shlex

import pytest

from pytest_sglang import redaction
from pytest_sglang.plugin.launch_args import check_gateway, check_launch
from pytest_sglang.plugin.settings import Settings
from pytest_sglang.plugin.xdist import is_worker


def header_lines(config: pytest.Config, settings: Settings) -> list[str]:
    if is_worker(config):
        return []
    # Notes: which of two contradicting settings won, and settings that do nothing in this run.
    return _mode_lines(settings) + [f"sglang: {note}" for note in settings.notes]


def _mode_lines(settings: Settings) -> list[str]:
    return [*_server_lines(settings), *_ray_lines(settings)]


def _ray_lines(settings: Settings) -> list[str]:
    """Where Ray places what (the address with its credentials masked)."""
    if settings.sglang_ray is None:
        return []
    from pytest_sglang.server.url import mask_userinfo

    placed = (f"launched servers placed on Ray (strategy {settings.sglang_ray_strategy}; the gateway runs here)"
              if settings.mode == "launch" else "nothing launched")
    shards = (f"each load over {settings.sglang_load_nodes} nodes" if settings.sglang_load_nodes > 1
              else "loads over 1 node unless a marker asks for more (load_nodes=N)")
    return [f"sglang: ray={mask_userinfo(settings.sglang_ray)}: {placed}; {shards}"]


def _server_lines(settings: Settings) -> list[str]:
    if settings.mode == "attach" and settings.sglang_url is not None:
        # str() of the parsed URL masks its credentials; the note says which credentials are sent.
        note = settings.sglang_url.auth_note(api_key_given=settings.sglang_api_key is not None)
        return [f"sglang: mode=attach url={settings.sglang_url}", *([f"sglang: auth: {note}"] if note else [])]
    if settings.mode is None:
        return ["sglang: no server configured (--sglang-url URL or --sglang-launch ARGS)"]
    from pytest_sglang.sglang.args import display_launch  # lazy: only runs that launch read SGLang's flags

    # Masked as SGLang will read the args (--api-ke K, --api-key=K), the command's own flags included;
    # shell-quoted, so that one argument holding spaces (quotes in an ini value) shows as one.
    from pytest_sglang.sglang.gateway_args import display_gateway_argv

    args = _joined(display_launch(settings.launch_args or (), settings.sglang_command or ()))
    log_dir = settings.sglang_log_dir or "<pytest basetemp>/sglang-logs"
    unknown = [f"sglang: warning: {line}" for line in _unknown_flags(settings)]
    if settings.fleet:
        gateway = " ".join(settings.sglang_gateway_command or ("smg launch (else sglang_router)",))
        workers = (f"workers={settings.sglang_workers}" if settings.sglang_workers is not None else
                   f"prefill={settings.sglang_prefill or 0} decode={settings.sglang_decode or 0}")
        gateway_args = _joined(display_gateway_argv(settings.sglang_gateway or ()))
        return [f"sglang: mode=launch runner={settings.runner} {workers} gateway={gateway} "
                "url=(free ports picked at start)", f"sglang: launch args (each worker): {args}",
                *([f"sglang: gateway args: {gateway_args}"] if settings.sglang_gateway else []),
                f"sglang: server logs in {log_dir}", *unknown]
    return [f"sglang: mode=launch runner={settings.runner} url=(free port picked at start)",
            f"sglang: launch args: {args}", f"sglang: server logs in {log_dir}", *unknown]


def _joined(argv: list[str]) -> str:
    """The argv as one line; an argument holding spaces (or nothing) is quoted, so it shows as one."""
    return " ".join(shlex.quote(a) if not a or any(c.isspace() for c in a) else a for a in argv)


def _unknown_flags(settings: Settings) -> list[str]:
    """Flags the recorded tables do not know (a newer SGLang or gateway): kept, and said here."""
    lines: list[str] = []
    for argv in (settings.launch_args, settings.sglang_prefill_launch, settings.sglang_decode_launch):
        lines += check_launch(list(argv or ()))
    if settings.fleet and settings.sglang_gateway:
        lines += check_gateway(list(settings.sglang_gateway))
    return list(dict.fromkeys(lines))


def kill_leftovers_text() -> str:
    from pytest_sglang.server.cleanup import kill_leftovers

    stopped = kill_leftovers()
    if not stopped:
        return "sglang: no leftover servers of earlier pytest-sglang runs found"
    lines = [f"sglang: {len(stopped)} leftover(s) of earlier runs:"]
    lines += [f"  {redaction.scrub(item)}" for item in stopped]
    return "\n".join(lines)
