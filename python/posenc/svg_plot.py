"""Small-multiple line charts as SVG, without matplotlib (not installed here), in the style of
posenc's C++ figures (src/report/svg_draw.cc: grey grid, the same ten colours, sans-serif).

    panels = [{"title": "ctx 1024", "series": [("yarn", [0, 25, 50], [40.1, 35.2, 30.0]), ...]}]
    write_panels("out.svg", "Title", panels, x_label="steps", y_label="perplexity", log_y=True)

x values are placed at equal spacing in the order of `x_ticks` (categorical: 0, 25, 50, 100, ...),
y on a log scale when log_y. Missing points (None, nan) break a line.
"""
import math
from xml.sax.saxutils import escape

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf"]


def _nice_ticks(lo, hi, log):
    if log:
        out = []
        e = math.floor(math.log10(lo))
        while 10 ** e <= hi * 1.0001:
            for m in (1, 2, 5):
                v = m * 10 ** e
                if lo <= v <= hi:
                    out.append(v)
            e += 1
        if len(out) < 3:  # a narrow range: a few values in between
            out = sorted(set(out + [round(lo + (hi - lo) * f, 3 - int(math.floor(math.log10(hi)))) for f in (0.1, 0.5, 0.9)]))
        return out
    step = 10 ** math.floor(math.log10((hi - lo) / 4 or 1))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= 6:
            step *= m
            break
    v = math.ceil(lo / step) * step
    out = []
    while v <= hi + 1e-9:
        out.append(v)
        v += step
    return out


def _fmt(v):
    if v >= 100 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.3g}"


def _finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def write_panels(path, title, panels, x_ticks, x_label="steps", y_label="perplexity", log_y=True,
                 columns=None, subtitle=None, shared_y=False):
    columns = columns or min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    pw, ph, ml, mr, mt, mb = 260, 200, 56, 12, 28, 40
    legend_h = 24
    head = 44 if subtitle else 30
    width = columns * (pw + ml + mr) + 10
    height = head + legend_h + rows * (ph + mt + mb)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="Helvetica, Arial, sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold" fill="#111111">{escape(title)}</text>']
    if subtitle:
        out.append(f'<text x="10" y="36" fill="#444444">{escape(subtitle)}</text>')
    names = []
    for p in panels:
        for name, _, _ in p["series"]:
            if name not in names:
                names.append(name)
    color = {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}
    x = 10
    for n in names:
        out.append(f'<line x1="{x}" y1="{head + 10}" x2="{x + 18}" y2="{head + 10}" stroke="{color[n]}" stroke-width="2"/>')
        out.append(f'<text x="{x + 22}" y="{head + 14}" fill="#222222">{escape(n)}</text>')
        x += 30 + 7 * len(n)

    def y_range(ps):
        ys = [v for p in ps for _, _, yy in p["series"] for v in yy if _finite(v) and (v > 0 or not log_y)]
        if not ys:
            return 1.0, 10.0
        lo, hi = min(ys), max(ys)
        if lo == hi:
            lo, hi = lo * 0.9, hi * 1.1
        return lo, hi

    shared = y_range(panels) if shared_y else None
    for i, p in enumerate(panels):
        ox = (i % columns) * (pw + ml + mr) + ml
        oy = head + legend_h + (i // columns) * (ph + mt + mb) + mt
        lo, hi = shared or y_range([p])
        f = (lambda v: math.log(v)) if log_y else (lambda v: v)
        pad = (f(hi) - f(lo)) * 0.05
        flo, fhi = f(lo) - pad, f(hi) + pad

        def sy(v):
            return oy + ph - (f(v) - flo) / (fhi - flo) * ph

        def sx(v):
            k = x_ticks.index(v)
            return ox + (k / max(1, len(x_ticks) - 1)) * pw

        out.append(f'<rect x="{ox}" y="{oy}" width="{pw}" height="{ph}" fill="#ffffff" stroke="#333333" stroke-width="1"/>')
        out.append(f'<text x="{ox + pw / 2}" y="{oy - 8}" text-anchor="middle" font-weight="bold" fill="#222222">{escape(p["title"])}</text>')
        for v in _nice_ticks(lo, hi, log_y):
            y = sy(v)
            if oy <= y <= oy + ph:
                out.append(f'<line x1="{ox}" y1="{y:.1f}" x2="{ox + pw}" y2="{y:.1f}" stroke="#e5e5e5" stroke-width="1"/>')
                out.append(f'<text x="{ox - 5}" y="{y + 4:.1f}" text-anchor="end" fill="#222222">{_fmt(v)}</text>')
        for v in x_ticks:
            xx = sx(v)
            out.append(f'<line x1="{xx:.1f}" y1="{oy}" x2="{xx:.1f}" y2="{oy + ph}" stroke="#e5e5e5" stroke-width="1"/>')
            out.append(f'<text x="{xx:.1f}" y="{oy + ph + 14}" text-anchor="middle" fill="#222222">{v}</text>')
        out.append(f'<text x="{ox + pw / 2}" y="{oy + ph + 30}" text-anchor="middle" fill="#111111">{escape(x_label)}</text>')
        out.append(f'<text x="{ox - 42}" y="{oy + ph / 2}" text-anchor="middle" fill="#111111" '
                   f'transform="rotate(-90 {ox - 42} {oy + ph / 2})">{escape(y_label)}</text>')
        for name, xs, ys in p["series"]:
            d, pen = [], "M"
            for xv, yv in zip(xs, ys):
                if not _finite(yv) or xv not in x_ticks or (log_y and yv <= 0):
                    pen = "M"
                    continue
                d.append(f"{pen}{sx(xv):.1f},{sy(yv):.1f}")
                pen = "L"
            if d:
                out.append(f'<path d="{" ".join(d)}" fill="none" stroke="{color[name]}" stroke-width="1.8"/>')
                for seg in d:
                    cx, cy = seg[1:].split(",")
                    out.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{color[name]}" stroke="#ffffff" stroke-width="0.8"/>')
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")
