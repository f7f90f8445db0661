"""Formatting helpers shared by the terminal, Markdown and HTML renderers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pytest_sglang.formatting import Value, fmt
from pytest_sglang.report.records import START_NODEID


def value(v: Value | list[Value], unit: str = "") -> str:
    text = ", ".join(fmt(x) for x in v) if isinstance(v, list) else fmt(v)
    return f"{text} {unit}" if unit and v is not None else text


def required(check: Mapping[str, Any]) -> str:
    return f"{check.get('op', '')} {value(check.get('required'), check.get('unit', ''))}".strip()


def verdict(check: Mapping[str, Any]) -> str:
    return "ok" if check.get("passed") else "FAILED"


def seconds(s: float | None) -> str:
    if s is None:
        return "?"
    if s == 0:
        return "0 s"
    if s >= 120:
        return f"{int(s // 60)} min {s % 60:.0f} s"
    return f"{s:.1f} s" if s >= 1 else f"{s * 1000:.0f} ms"


def clip(text: str, width: int) -> str:
    """Cut in the middle: test ids differ at their end, file paths at their start."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep // 3] + "…" + text[-(keep - keep // 3):]


#: A URL in a check's name ("... of worker 1 (http://10.0.0.7:30000)"): the part a table may cut.
_URL = re.compile(r"\w+://[^\s)]+")
#: The least of a URL worth showing: its scheme and a cut, "http:…:30000".
_MIN_URL = 12


def fit_name(name: str, width: int) -> str | None:
    """``name`` within ``width`` by cutting only its URL (the metric stays whole), or None if it cannot."""
    if len(name) <= width:
        return name
    found = _URL.search(name)
    if found is None:
        return None
    room = width - (len(name) - len(found.group()))
    if room < _MIN_URL:
        return None
    return name[: found.start()] + clip(found.group(), room) + name[found.end():]


def phases_line(server: Mapping[str, Any]) -> str:
    phases = server.get("phases") or []
    parts = [f"{p['name']} {seconds(p['duration_s'])}" for p in phases]
    ready = server.get("ready_s")
    head = f"ready in {seconds(ready)}" if ready is not None else "not measured (attached)"
    return head + (": " + ", ".join(parts) if parts else "")


def headline(server: Mapping[str, Any] | None) -> str:
    if not server:
        return "no server identity recorded"
    # No spaces inside "(tp=2,dp=1)": a wrapped line never splits it.
    sizes = [f"{n}={server[k]}" for n, k in (("tp", "tp_size"), ("dp", "dp_size")) if server.get(k)]
    text = " | ".join([f"SGLang {server.get('sglang_version') or '?'}", str(server.get("runner") or "?"),
                       str(server.get("model") or "?")])
    return text + (f" ({','.join(sizes)})" if sizes else "")


def hardware(server: Mapping[str, Any]) -> str:
    if server.get("gpu_model") or server.get("gpu_count"):
        gpu = f"GPU {server.get('gpu_count') or '?'} x {server.get('gpu_model') or 'unknown model'}"
    elif server.get("device") and server.get("device") != "cuda":
        gpu = f"device {server['device']}"
    else:
        gpu = "GPU unknown"
    host = server.get("host") or {}
    bits = [str(host["hostname"])] if host.get("hostname") else []
    bits += [f"{host['cpus']} CPUs"] if host.get("cpus") else []
    bits += [f"{host['memory_gb']} GB RAM"] if host.get("memory_gb") else []
    return gpu + ("; host " + ", ".join(bits) if bits else "")


def baseline_launches(baseline: Mapping[str, Any]) -> str | None:
    """How many launches the baseline holds and what that means (None: nothing was compared, or an older report)."""
    if baseline.get("fingerprint_differences") or baseline.get("compared_nothing"):
        return None
    launches = baseline.get("launches") or 1
    if launches > 1:
        return f"{launches} launches: judged against a new launch of the baseline"
    note = baseline.get("launch_note")
    return str(note) if note else None


def baseline_state(baseline: Mapping[str, Any]) -> str:
    if baseline.get("fingerprint_differences"):
        return "NOT COMPARED: measured on another setup (" + (
            "fails: --sglang-baseline-strict" if baseline.get("strict") else "warning") + ")"
    missing = baseline.get("not_in_baseline") or []
    if baseline.get("compared_nothing"):
        return (f"COMPARED NOTHING: none of the {len(missing)} test(s) that measured figures is in the baseline "
                f"(fails): {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
    # A test the baseline never ran compared nothing: the header must not say it was compared.
    gap = (f"; {len(missing)} test(s) not in the baseline, not compared: {', '.join(missing[:3])}"
           f"{' ...' if len(missing) > 3 else ''}") if missing else ""
    if baseline.get("candidate_changes"):
        return "candidate compared (same model, GPU and host)" + gap
    return "fingerprint matches" + gap


def candidate_lines(baseline: Mapping[str, Any]) -> list[str]:
    """``candidate vs baseline: launch_args: --tp 1 -> --tp 2``, one per changed field."""
    return [f"candidate vs baseline: {c['field']}: {c['baseline']} -> {c['candidate']}"
            for c in baseline.get("candidate_changes") or []]


def start_failure(report: Mapping[str, Any]) -> str | None:
    """What went wrong before any test could use the server: it did not start, or (attached) not answer."""
    if report["summary"].get("server_start") != "error":
        return None
    attached = any(r.get("nodeid") == START_NODEID and r.get("gate") == "attach" for r in report.get("records", []))
    return "the server could not be attached" if attached else "the server did not start"


def verdict_line(report: Mapping[str, Any]) -> str:
    """``PASSED: 4/4 checks ok in 2 tests (...)``; never PASSED for a run that was stopped early."""
    s = report["summary"]
    start_failed = start_failure(report)
    failed = bool(s["checks_failed"] or s["failed"] or s["error"] or start_failed)
    status = "FAILED" if failed else "PASSED"
    if s.get("interrupted"):
        status = ("FAILED, interrupted" if failed else "INTERRUPTED") + ": the run was stopped before it finished"
        status += f"; {start_failed};" if start_failed else ";"
    else:
        status += f": {start_failed};" if start_failed else ":"
    # A check that could not be judged is not among the checks: the headline still says it exists.
    unchecked = sum(len(unchecked_notes(test)) for test in report.get("tests") or [])
    return (f"{status} {s['checks'] - s['checks_failed']}/{s['checks']} checks ok in {s['tests']} "
            f"test{'' if s['tests'] == 1 else 's'} "
            f"({s['passed']} passed, {s['failed']} failed, {s['error']} errors, {s['skipped']} skipped)"
            + (f"; {unchecked} not checked" if unchecked else ""))


def passed_baseline_notes(test: Mapping[str, Any]) -> list[str]:
    """The notes of a passing test's baseline comparison: what it could not judge.

    A failing comparison says it in its assertion message; a passing one would otherwise keep it in
    the JSON alone.
    """
    if test.get("outcome") != "passed":
        return []
    return [str(note) for gate in test.get("gates") or [] if gate.get("gate") == "baseline"
            for note in gate.get("notes") or []]


def profile_notes(test: Mapping[str, Any]) -> list[str]:
    """The profiler trace a failed performance gate left (``--sglang-profile-on-failure``), or why it did not."""
    line = (test.get("properties") or {}).get("sglang.profile")
    return [str(line)] if line else []


def unchecked_notes(test: Mapping[str, Any]) -> list[str]:
    """``fleet: worker 1 (...): weights not compared (...)``: what a test's gates could not check.

    A passing gate would otherwise keep them in the JSON alone (``--sglang-strict`` fails them).
    """
    return [f"{gate.get('gate')}: {line}" for gate in test.get("gates") or [] for line in gate.get("unchecked") or []]


#: The columns of an image load's figures in the Markdown and HTML reports (the terminal's one line has them).
IMAGE_HEADER = ("images per request", "image tokens per request", "TTFT with images, mean", "p99", "image tokens from")


def image_cells(images: Mapping[str, Any]) -> list[str]:
    """An image load's figures (its ``images`` report) as the cells under :data:`IMAGE_HEADER`."""
    tokens = images.get("image_tokens_per_request")
    return [f"{images.get('images_per_request', 0):g}", "not reported" if tokens is None else f"{tokens:,.1f}",
            f"{images.get('mean_ttft_ms', 0):,.1f} ms", f"{images.get('p99_ttft_ms', 0):,.1f} ms",
            str(images.get("image_tokens_basis") or "-")]
