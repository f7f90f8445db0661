"""Turn a failed start into one explained error (STYLE.md §3.3 layout).

headline (what, where, facts) / phase reached / known fatal line + explanation / last probe /
log tail / Fix line naming the exact options. Every text passes through redaction.
"""

from __future__ import annotations

import signal

from pytest_sglang import redaction
from pytest_sglang.errors import ServerExited, ServerNotReady, ServerStartError, ServerUnavailable, SGLangError
from pytest_sglang.exits import FatalLine
from pytest_sglang.server.base import ExitStatus, RunningProcess
from pytest_sglang.server.phases import StartupReport, log_tail
from pytest_sglang.server.probe import Probe, Target, WaitState
from pytest_sglang.server.progress import format_duration
from pytest_sglang.server.url import mask_userinfo

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
    error.exit_status = status
    error.phase = report.phase if report is not None else None
    error.fatal_line = fatal
    error.log_path = target.process.log_path
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
    error.phase = report.phase if report is not None else None
    error.last_probe = state.last_probe
    return error


def wrong_server_error(target: Target, state: WaitState, problem: str) -> ServerStartError:
    """The launched server is alive, but another server answers at its address."""
    port = target.expected.port if target.expected is not None else None
    lines = [f"{describe_target(target)} was launched, but another server answers at {target.url}: {problem}.",
             f"Last probe: {state.last_probe}", *tail_block(target, 10),
             f"Fix: stop what holds port {port} (ss -ltnp 'sport = :{port}'), or drop --port from "
             "--sglang-launch so pytest-sglang picks a free port."]
    return ServerStartError(redaction.scrub("\n".join(lines)))


def unavailable_error(target: Target, state: WaitState) -> ServerUnavailable:
    """Attach mode: one diagnosis and fix per way the URL can fail (not one catch-all)."""
    what, fix = attach_diagnosis(target, state)
    lines = [f"SGLang server {target.url} (mode=attach) {what} ({state.probes} probes in "
             f"{format_duration(state.elapsed_s)})", f"Last probe: {state.last_probe}",
             f"Fix: {fix}" + ("" if fix.endswith(".") else ".")]
    error = ServerUnavailable(redaction.scrub("\n".join(lines)))
    error.last_probe = state.last_probe
    return error


def attach_diagnosis(target: Target, state: WaitState) -> tuple[str, str]:
    """(what happened, the fix) for the last probe of an attach that gave up."""
    probe = state.last
    if probe.kind == "status":
        return _status_diagnosis(target, state, probe)
    return _TRANSPORT.get(probe.kind, _other_transport)(target, state, probe)


def _refused(target: Target, state: WaitState, probe: Probe) -> tuple[str, str]:
    return "does not accept connections", ATTACH_FIX.removeprefix("Fix: ")


def _timed_out(target: Target, state: WaitState, probe: Probe) -> tuple[str, str]:
    return (f"accepts connections but never answered GET {probe.path} (the last probe waited "
            f"{_secs(probe.timeout_s)})",
            "the server may be hung or overloaded: read its log. Attach waits at most the smaller of "
            "--sglang-startup-timeout and 30 s; raise --sglang-startup-timeout if the server is only slow")


def _tls(target: Target, state: WaitState, probe: Probe) -> tuple[str, str]:
    if "WRONG_VERSION_NUMBER" in probe.detail or "wrong version number" in probe.detail:
        plain = f"http://{target.url.display.split('://', 1)[1]}"
        return ("speaks plain http, not https (the TLS handshake got a non-TLS answer: WRONG_VERSION_NUMBER)",
                f"use --sglang-url {plain}")
    return (f"failed the TLS handshake ({probe.detail})",
            "check the server's certificate (SSL_CERT_FILE for a private CA), or use http:// if the "
            "server speaks plain http")


def _closed(target: Target, state: WaitState, probe: Probe) -> tuple[str, str]:
    hint = "" if target.url.scheme == "https" else ", or an https-only port (then use https://)"
    return (f"closed the connection without answering GET {probe.path}",
            f"check that --sglang-url points at an HTTP server: not another protocol's port{hint}")


def _dns(target: Target, state: WaitState, probe: Probe) -> tuple[str, str]:
    return (f"cannot be reached: host {target.url.host!r} not found ({probe.detail})",
            "correct the host in --sglang-url (ini sglang_url, env PYTEST_SGLANG_URL)")


def _other_transport(target: Target, state: WaitState, probe: Probe) -> tuple[str, str]:
    return f"cannot be reached: {probe.detail}", ATTACH_FIX.removeprefix("Fix: ")


_TRANSPORT = {"refused": _refused, "timeout": _timed_out, "tls": _tls, "closed": _closed, "dns": _dns}


def _status_diagnosis(target: Target, state: WaitState, probe: Probe) -> tuple[str, str]:
    status, path = probe.status, probe.path
    if probe.location is not None:
        return (f"redirects GET {path} to {mask_userinfo(probe.location)}",
                f"use the address it redirects to: --sglang-url {_redirect_base(probe.location, path)}")
    if path != "/health" and status == 404:
        return ("answers GET /health with 200 but has neither /server_info nor /get_server_info (404): not an "
                "SGLang server, or a gateway that does not forward them",
                "point --sglang-url at the SGLang server itself; the gates read its /server_info")
    if path != "/health":
        return (f"answers GET /health with 200 but GET {path} with {status}: the server fails to describe "
                f"itself (a server bug){_body(probe)}",
                f"read the server's log for the error behind {path}; the gates need /server_info")
    if status == 503:
        return (f"is not healthy after {state.elapsed_s:.1f}s",
                "wait until the server has finished warming up (its /health answers 200) or read its log; "
                "attach waits at most 30 s (min of --sglang-startup-timeout and 30).")
    if status in (404, 405):
        return (f"answers GET /health with {status}: not an SGLang server at this address{_body(probe)}",
                "point --sglang-url at the SGLang server itself (the host:port of sglang.launch_server"
                f"{', without the path ' + repr(target.url.path) if target.url.path else ''}); a gateway or "
                "router in front of it must serve /health")
    if status in (401, 403):
        return (f"answers GET /health with {status}: a proxy asks for credentials (SGLang never protects "
                "/health)", "add user:password to --sglang-url (sent as HTTP Basic auth) or open /health "
                "on the proxy")
    if status == 400 and target.url.scheme == "http":
        return (f"answers GET /health with 400{_body(probe)}",
                "if the server speaks https, use https:// in --sglang-url; otherwise check the URL")
    return (f"answers GET /health with {status}{_body(probe)}",
            "check that --sglang-url points at a healthy SGLang server (a gateway answers 502/504 when its "
            "upstream is down) and read its log")


def _body(probe: Probe) -> str:
    return f"; body: {probe.detail!r}" if probe.detail else ""


def _secs(seconds: float | None) -> str:
    return "the probe timeout" if seconds is None else f"{seconds:.1f}s"


def _redirect_base(location: str, path: str) -> str:
    base = location.split("?", 1)[0]
    return mask_userinfo(base.removesuffix(path).rstrip("/") or base)
