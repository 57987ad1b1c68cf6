"""Inline SVG charts of the CDC view (pure; no JavaScript, so they render in any sandboxed frame)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 56, 16, 36


@dataclass(frozen=True)
class Point:
    """One batch on the chart."""

    at: datetime
    throughput: float | None  # records per second
    latency: float | None  # seconds


def _scale(values: Sequence[float]) -> float:
    top = max(values, default=0.0)
    if top <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(top))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if top <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def _label(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def throughput_latency_svg(points: Sequence[Point], title: str) -> str:
    """Bars of records/s per batch (left axis) and a line of latency in seconds (right axis), oldest first.

    Latency is the source commit time of the batch's oldest change to the batch's commit in the lake.
    """
    points = sorted(points, key=lambda p: p.at)
    label = escape(title)
    if not points:
        return (
            f'<svg class="chart" role="img" aria-label="{label}" viewBox="0 0 {WIDTH} 60" width="{WIDTH}" height="60">'
            '<text x="8" y="34" class="muted">no batches yet</text></svg>'
        )
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    t_max = _scale([p.throughput or 0.0 for p in points])
    l_max = _scale([p.latency or 0.0 for p in points])
    slot = plot_w / len(points)
    bar = max(2.0, slot * 0.6)
    out = [
        f'<svg class="chart" role="img" aria-label="{label}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" style="max-width: 100%; height: auto" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{label}</title>",
    ]
    for i in range(5):  # grid and both axes' labels
        frac = i / 4
        y = TOP + plot_h * (1 - frac)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="axis" text-anchor="end">{_label(t_max * frac)}</text>')
        out.append(f'<text x="{WIDTH - RIGHT + 6}" y="{y + 4:.1f}" class="axis lat">{_label(l_max * frac)}</text>')
    line = []
    for i, p in enumerate(points):
        x = LEFT + slot * i + (slot - bar) / 2
        tip = f"{p.at:%H:%M:%S}: " + ", ".join(
            part
            for part in (
                f"{p.throughput:.0f} records/s" if p.throughput is not None else "",
                f"latency {p.latency:.1f} s" if p.latency is not None else "",
            )
            if part
        )
        if p.throughput is not None:
            h = plot_h * min(1.0, p.throughput / t_max)
            out.append(
                f'<rect x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar:.1f}" height="{h:.1f}" class="bar">'
                f"<title>{escape(tip)}</title></rect>"
            )
        if p.latency is not None:
            cx = LEFT + slot * i + slot / 2
            cy = TOP + plot_h * (1 - min(1.0, p.latency / l_max))
            line.append((cx, cy, tip))
    if line:
        path = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y, _) in enumerate(line))
        out.append(f'<path d="{path}" class="latency"/>')
        for x, y, tip in line:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" class="dot"><title>{escape(tip)}</title></circle>')
    first, last = points[0].at, points[-1].at
    out.append(f'<text x="{LEFT}" y="{HEIGHT - 14}" class="axis">{first:%H:%M:%S}</text>')
    out.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 14}" class="axis" text-anchor="end">{last:%H:%M:%S} UTC</text>')
    out.append(f'<text x="{LEFT}" y="{HEIGHT - 2}" class="legend">▮ records/s (left)</text>')
    out.append(
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 2}" class="legend lat" text-anchor="end">'
        "— latency, s (right): oldest change's source commit to lake commit</text>"
    )
    out.append("</svg>")
    return "".join(out)
