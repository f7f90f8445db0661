"""Inline SVG charts generated in Python (no scripts, no fonts, no network).

Line/step charts with axes, units and legends, a startup Gantt chart, and measured-vs-required bars.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_FONT = 'font-family="sans-serif"'
W, H = 720, 340
Scale = Callable[[float], float]
_L, _R, _T, _B = 70, 20, 36, 78  # margins: room for tick labels, axis titles and the legend


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]
    #: Overrides the chart's ``step`` (a CDF known only at a few percentiles is drawn as points).
    step: bool | None = None


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k steps) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def tick_label(v: float) -> str:
    if v != 0 and (abs(v) >= 1e9 or abs(v) < 0.01):
        return f"{v:.3g}"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:g}"


def _text(x: float, y: float, content: str, size: int = 11, anchor: str = "start", extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" {_FONT}{extra}>'
            f"{escape(content)}</text>")


def _svg(name: str, title: str, body: list[str], width: int = W, height: int = H) -> str:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(name)}" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{escape(title)}">')
    bg = f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>'
    heading = _text(width / 2, 22, title, 15, "middle", ' font-weight="bold"')
    return "\n".join([head, bg, heading, *body, "</svg>"])


def _axes(xt: list[float], yt: list[float], x_label: str, y_label: str,
          sx: Scale, sy: Scale, y_fmt: Callable[[float], str] = tick_label) -> list[str]:
    out = []
    x0, x1, y0, y1 = _L, W - _R, H - _B, _T
    for v in yt:
        y = sy(v)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(_text(x0 - 6, y + 4, y_fmt(v), 11, "end"))
    for v in xt:
        x = sx(v)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 5}" stroke="#333"/>')
        out.append(f'<text x="{x:.1f}" y="{y0 + 18}" text-anchor="middle" font-size="11" {_FONT}>'
                   f"{tick_label(v)}</text>")
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/>')
    out.append(f'<text x="{(x0 + x1) / 2}" y="{y0 + 36}" text-anchor="middle" font-size="12" {_FONT}>'
               f"{escape(x_label)}</text>")
    out.append(f'<text x="16" y="{(y0 + y1) / 2}" text-anchor="middle" font-size="12" {_FONT} '
               f'transform="rotate(-90 16 {(y0 + y1) / 2})">{escape(y_label)}</text>')
    return out


def _legend(names: Sequence[str]) -> tuple[list[str], int]:
    """Legend entries below the x axis title, wrapped into rows; returns (elements, extra height)."""
    out, x, y = [], float(_L), float(H - 22)
    for i, name in enumerate(names):
        label = name if len(name) <= 64 else name[:30] + "…" + name[-33:]
        width = 26 + 6.5 * len(label)
        if x + width > W - _R and x > _L:
            x, y = float(_L), y + 15
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{x:.0f}" y="{y - 9:.0f}" width="14" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 18:.0f}" y="{y:.0f}" font-size="11" {_FONT}>{escape(label)}</text>')
        x += width
    return out, int(y - (H - 22))


def line_chart(name: str, title: str, series: Sequence[Series], x_label: str, y_label: str, *,
               step: bool = False, y_max: float | None = None,
               y_fmt: Callable[[float], str] = tick_label) -> str:
    """Lines with point markers (``step=True`` draws a CDF as a staircase, without markers)."""
    pts = [p for s in series for p in s.points]
    if not pts:
        return empty(name, title, "no data")
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    xt = nice_ticks(min(0.0, min(xs)), max(xs) * 1.05)  # keep the last point off the frame
    yt = nice_ticks(0.0, y_max if y_max is not None else max(ys) * 1.05)
    sx = _scale(xt[0], xt[-1], _L, W - _R)
    sy = _scale(yt[0], yt[-1], H - _B, _T)
    body = _axes(xt, yt, x_label, y_label, sx, sy, y_fmt)
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        ordered = sorted(s.points)
        stepped = step if s.step is None else s.step
        coords = _staircase(ordered) if stepped else ordered
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in coords)
        body.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        if not stepped:
            body += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{color}"/>'
                     for x, y in ordered]
    legend, extra = _legend([s.name for s in series])
    return _svg(name, title, body + legend, height=H + extra)


def _staircase(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    prev_y = 0.0
    for x, y in points:
        out += [(x, prev_y), (x, y)]
        prev_y = y
    return out


def _scale(lo: float, hi: float, a: float, b: float) -> Scale:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def empty(name: str, title: str, why: str) -> str:
    body = [f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" font-size="13" fill="#666" {_FONT}>'
            f"{escape(why)}</text>"]
    return _svg(name, title, body, height=120)


def gantt(name: str, title: str, phases: Sequence[tuple[str, float, float]], *,
          x_label: str = "seconds since launch", none: str = "no startup phases recorded (attached server)") -> str:
    """One bar per phase on a seconds axis, each labelled with its duration."""
    if not phases:
        return empty(name, title, none)
    row, label_w = 26, 190
    height = _T + row * len(phases) + 56
    end = max(p[2] for p in phases)
    xt = nice_ticks(0.0, end)
    x0, x1 = label_w, W - 80
    sx = _scale(0.0, xt[-1], x0, x1)
    body = []
    for v in xt:
        body.append(f'<line x1="{sx(v):.1f}" y1="{_T}" x2="{sx(v):.1f}" y2="{height - 44}" '
                    'stroke="#e0e0e0"/>')
        body.append(f'<text x="{sx(v):.1f}" y="{height - 30}" text-anchor="middle" font-size="11" {_FONT}>'
                    f"{tick_label(v)}</text>")
    for i, (label, start, stop) in enumerate(phases):
        y = _T + 6 + i * row
        # One colour: a phase is no series, and red/green mean failed/ok in the other charts.
        color = PALETTE[0]
        width = max(2.0, sx(stop) - sx(start))
        body.append(_text(x0 - 8, y + 14, label, 12, "end"))
        body.append(f'<rect x="{sx(start):.1f}" y="{y}" width="{width:.1f}" height="18" fill="{color}"/>')
        body.append(f'<text x="{sx(start) + width + 5:.1f}" y="{y + 14}" font-size="11" {_FONT}>'
                    f"{_dur(stop - start)}</text>")
    body.append(f'<text x="{(x0 + x1) / 2}" y="{height - 10}" text-anchor="middle" font-size="12" {_FONT}>'
                f"{x_label}</text>")
    return _svg(name, title, body, height=height)


def _dur(s: float) -> str:
    """Like the terminal's startup line: "268 ms", "16.8 s", "15 min 3 s" ("0.27 s" read as noise)."""
    if s >= 120:
        return f"{int(s // 60)} min {s % 60:.0f} s"
    if s < 0.0005:
        return "< 1 ms"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def measured_vs_required(name: str, title: str,
                         items: Sequence[tuple[str, float, float, bool, str]]) -> str:
    """Per check: a bar for the measured value and a black tick at the required value (own scale per row)."""
    if not items:
        return empty(name, title, "no numeric checks")
    row, label_w = 30, 260
    height = _T + row * len(items) + 40
    x0, x1 = label_w, W - 190
    body = []
    for i, (label, measured, required, passed, unit) in enumerate(items):
        y = _T + 8 + i * row
        top = max(measured, required, 1e-12) * 1.1
        w = (x1 - x0) * max(measured, 0.0) / top
        rx = x0 + (x1 - x0) * max(required, 0.0) / top
        color = "#2ca02c" if passed else "#d62728"
        body.append(_text(x0 - 8, y + 14, label, 12, "end"))
        body.append(f'<rect x="{x0}" y="{y}" width="{x1 - x0}" height="18" fill="#f2f2f2"/>')
        body.append(f'<rect x="{x0}" y="{y}" width="{w:.1f}" height="18" fill="{color}"/>')
        body.append(f'<line x1="{rx:.1f}" y1="{y - 3}" x2="{rx:.1f}" y2="{y + 21}" stroke="#000" '
                    'stroke-width="2"/>')
        body.append(f'<text x="{x1 + 8}" y="{y + 14}" font-size="11" {_FONT}>'
                    f"{escape(tick_label(measured))} {escape(unit)} (required "
                    f"{escape(tick_label(required))})</text>")
    legend_y = height - 14
    body.append(f'<rect x="{x0}" y="{legend_y - 9}" width="14" height="10" fill="#2ca02c"/>'
                f'<text x="{x0 + 18}" y="{legend_y}" font-size="11" {_FONT}>measured (ok)</text>'
                f'<rect x="{x0 + 120}" y="{legend_y - 9}" width="14" height="10" fill="#d62728"/>'
                f'<text x="{x0 + 138}" y="{legend_y}" font-size="11" {_FONT}>measured (failed)</text>'
                f'<line x1="{x0 + 262}" y1="{legend_y - 11}" x2="{x0 + 262}" y2="{legend_y + 2}" '
                'stroke="#000" stroke-width="2"/>' + _text(x0 + 270, legend_y, "required"))
    return _svg(name, title, body, height=height)
