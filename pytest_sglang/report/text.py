"""Formatting helpers shared by the terminal, Markdown and HTML renderers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_sglang.gates.base import fmt


def value(v: Any, unit: str = "") -> str:
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


def baseline_state(baseline: Mapping[str, Any]) -> str:
    """How the run was compared with its baseline, in a few words."""
    if baseline.get("fingerprint_differences"):
        return "NOT COMPARED: measured on another setup (" + (
            "fails: --sglang-baseline-strict" if baseline.get("strict") else "warning") + ")"
    if baseline.get("candidate_changes"):
        return "candidate compared (same model, GPU and host)"
    return "fingerprint matches"


def candidate_lines(baseline: Mapping[str, Any]) -> list[str]:
    """``candidate vs baseline: launch_args: --tp 1 -> --tp 2``, one per changed field."""
    return [f"candidate vs baseline: {c['field']}: {c['baseline']} -> {c['candidate']}"
            for c in baseline.get("candidate_changes") or []]


def verdict_line(report: Mapping[str, Any]) -> str:
    """``PASSED: 4/4 checks ok in 2 tests (...)``; never PASSED for a run that was stopped early."""
    s = report["summary"]
    start_failed = s.get("server_start") == "error"
    failed = bool(s["checks_failed"] or s["failed"] or s["error"] or start_failed)
    status = "FAILED" if failed else "PASSED"
    if s.get("interrupted"):
        status = ("FAILED, interrupted" if failed else "INTERRUPTED") + ": the run was stopped before it finished"
        status += "; the server did not start;" if start_failed else ";"
    else:
        status += ": the server did not start;" if start_failed else ":"
    return (f"{status} {s['checks'] - s['checks_failed']}/{s['checks']} checks ok in {s['tests']} "
            f"test{'' if s['tests'] == 1 else 's'} "
            f"({s['passed']} passed, {s['failed']} failed, {s['error']} errors, {s['skipped']} skipped)")
