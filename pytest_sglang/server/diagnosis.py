"""Turn a failed start into one explained error (STYLE.md §3.3 layout).

headline (what, where, facts) / phase reached / known fatal line + explanation / last probe /
log tail / Fix line naming the exact options. Every text passes through redaction.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from pytest_sglang import redaction
from pytest_sglang.errors import ServerExited, ServerNotReady, ServerUnavailable, SGLangError
from pytest_sglang.server.fatal import FatalLine
from pytest_sglang.server.phases import StartupReport, log_tail
from pytest_sglang.server.progress import format_duration

if TYPE_CHECKING:
    from pytest_sglang.server.readiness import Target, WaitState
    from pytest_sglang.server.runner import ExitStatus, RunningProcess

TAIL_LINES = 30
TIMEOUT_FIX = ("Fix: raise --sglang-startup-timeout (ini sglang_startup_timeout, env "
               "PYTEST_SGLANG_STARTUP_TIMEOUT) or read the log above.")
ATTACH_FIX = ("Fix: start the server first or correct --sglang-url (ini sglang_url, env PYTEST_SGLANG_URL); "
              "attach mode never launches anything.")


def process_identity(process: RunningProcess) -> str:
    """``pid 4242`` / ``container NAME (id, image X)``: ``describe()`` without its trailing state.

    Both runners' ``describe()`` end in ``, <state>``; the exit headline states how it ended itself
    (and for a self-inflicted SIGKILL differently from ``ExitStatus.describe``).
    """
    text = process.describe()
    status = process.exit_status()
    suffix = f", {'running' if status is None else status.describe()}"
    return text[: -len(suffix)] if text.endswith(suffix) else text


def describe_target(target: Target) -> str:
    where = f"SGLang server {target.url} (mode={target.mode}"
    if target.process is not None:
        where += f", {target.process.describe()}"
    return where + ")"


def phase_line(report: StartupReport | None, elapsed_s: float) -> str | None:
    if report is None:
        return None
    since = max(0.0, elapsed_s - report.phase_since_s)
    return f"Phase reached: {report.phase} (for {format_duration(since)})"


def tail_block(target: Target, n: int = TAIL_LINES) -> list[str]:
    if target.process is None:
        return []
    path = target.process.log_path
    lines = log_tail(path, n)
    if not lines:
        return [f"The log {path} is empty."]
    return [f"Last {len(lines)} lines of {path}:", *(f"  {line}" for line in lines)]


def start_failure(target: Target, state: WaitState) -> SGLangError:
    """The error for a wait that ended without a ready server."""
    report = target.follower.stop() if target.follower is not None else None
    if target.process is not None and target.process.exit_status() is not None:
        return exited_error(target, state, report)
    if target.mode == "attach":
        return unavailable_error(target, state)
    return not_ready_error(target, state, report)


def exited_error(target: Target, state: WaitState, report: StartupReport | None) -> ServerExited:
    assert target.process is not None
    status = target.process.exit_status()
    fatal = report.primary_fatal if report is not None else None
    lines = [f"SGLang server {target.url} (mode={target.mode}, {process_identity(target.process)}) exited "
             f"before it was ready: {_how(status, fatal)}, after {format_duration(state.elapsed_s)}"]
    lines += [x for x in (phase_line(report, state.elapsed_s),) if x]
    if fatal is not None:
        lines.append(fatal.message())
    cause = report.last_exception if report is not None else None
    if cause and (fatal is None or cause not in fatal.line):
        lines.append(f"Cause (last exception in the log): {cause}")
    lines.append(f"Last probe: {state.last_probe}")
    lines += tail_block(target)
    lines.append(_exit_fix(status, fatal))
    error = ServerExited(redaction.scrub("\n".join(lines)))
    error.exit_status = status  # type: ignore[attr-defined]
    error.phase = report.phase if report is not None else None  # type: ignore[attr-defined]
    error.fatal_line = fatal  # type: ignore[attr-defined]
    error.log_path = target.process.log_path  # type: ignore[attr-defined]
    return error


def _how(status: ExitStatus | None, fatal: FatalLine | None) -> str:
    if status is None:
        return "exited"
    if status.killed_by() == signal.SIGKILL and fatal is not None and "SIGKILL" not in fatal.explanation:
        # SGLang SIGKILLs its own process tree when a child fails: not the OOM killer this time.
        return "killed by SIGKILL (SGLang kills its whole process tree when a child process fails; see below)"
    return status.describe()


def _exit_fix(status: ExitStatus | None, fatal: FatalLine | None) -> str:
    # Most specific first: the runner's own remedy (a container's memory limit) names options the
    # log's fatal line cannot know about.
    specific = status.fix() if status is not None else None
    if specific:
        return specific if specific.startswith("Fix: ") else f"Fix: {specific}"
    if fatal is not None:
        return "Fix: see the explanation of the fatal line above, then read the log."
    if status is not None and status.killed_by() == signal.SIGKILL:
        return ("Fix: check `dmesg -T | grep -i oom`; lower memory use (--mem-fraction-static, "
                "--hicache-size, --max-total-tokens) or give the host more memory.")
    return "Fix: read the log above; the server's own error is usually in its last lines."


def not_ready_error(target: Target, state: WaitState, report: StartupReport | None) -> ServerNotReady:
    lines = [f"{describe_target(target)} not ready after {state.elapsed_s:.1f}s ({state.probes} probes)"]
    lines += [x for x in (phase_line(report, state.elapsed_s),) if x]
    lines.append(f"Last probe: {state.last_probe}")
    lines += tail_block(target)
    lines.append(TIMEOUT_FIX)
    error = ServerNotReady(redaction.scrub("\n".join(lines)))
    error.phase = report.phase if report is not None else None  # type: ignore[attr-defined]
    error.last_probe = state.last_probe  # type: ignore[attr-defined]
    return error


def unavailable_error(target: Target, state: WaitState) -> ServerUnavailable:
    if not state.answered:
        what = "does not accept connections"
        fix = ATTACH_FIX
    else:
        what = f"is not healthy after {state.elapsed_s:.1f}s"
        fix = ("Fix: wait until the server has finished warming up (its /health answers 200) or read "
               "its log; attach waits at most 30 s (min of --sglang-startup-timeout and 30).")
    lines = [f"SGLang server {target.url} (mode=attach) {what} ({state.probes} probes in "
             f"{format_duration(state.elapsed_s)})", f"Last probe: {state.last_probe}", fix]
    error = ServerUnavailable(redaction.scrub("\n".join(lines)))
    error.last_probe = state.last_probe  # type: ignore[attr-defined]
    return error
