#!/usr/bin/env python3
"""Draws the cost-recall frontier of each strategy on several corpora side by side, one panel
per corpus, from the JSON `scripts/replay-compare.py --summary-json` writes:

    python3 scripts/replay-compare.py --cli target/release/cutctx ../shared/realworld/long-runs \\
        --summary-json /tmp/dev.json --fractions 0.5 0.3 -- --warm-prefix
    python3 scripts/replay-compare.py --cli target/release/cutctx data/heldout \\
        --summary-json /tmp/heldout.json --fractions 0.5 0.3 -- --warm-prefix
    python3 scripts/frontier-chart.py --out docs/replay-frontier-sets.svg \\
        development=/tmp/dev.json held-out=/tmp/heldout.json

In each panel, x is a strategy's cost over the corpus as a multiple of the session's (log
scale), y its recall (needed identifiers sent verbatim); one mark per window (filled: the
first window given, hollow: the second). Strategies whose calls leave the window are drawn in
grey. Standard library only.
"""

import argparse
import json
import math
import pathlib
from xml.sax.saxutils import escape

W, H, PAD, GAP = 420, 360, 48, 24
X_MIN, X_MAX = 0.5, 16.0


def x_of(ratio, left):
    ratio = min(max(ratio, X_MIN), X_MAX)
    return left + PAD + (W - 2 * PAD) * math.log(ratio / X_MIN) / math.log(X_MAX / X_MIN)


def y_of(recall, y_min):
    return PAD + (H - 2 * PAD) * (1 - (recall - y_min) / (1 - y_min))


def panel(name, summary, left, y_min):
    out = [f'<rect x="{left}" y="0" width="{W}" height="{H}" fill="white" stroke="#ccc"/>',
           f'<text x="{left + W / 2}" y="18" text-anchor="middle" font-size="13">'
           f'{escape(name)}: {summary["runs"]} runs</text>']
    for tick in [0.5, 1, 2, 4, 8, 16]:
        x = x_of(tick, left)
        out.append(f'<line x1="{x:.1f}" y1="{PAD}" x2="{x:.1f}" y2="{H - PAD}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{H - PAD + 14}" text-anchor="middle" font-size="10">{tick}×</text>')
    steps = 5
    for i in range(steps + 1):
        r = y_min + (1 - y_min) * i / steps
        y = y_of(r, y_min)
        out.append(f'<line x1="{left + PAD}" y1="{y:.1f}" x2="{left + W - PAD}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left + PAD - 4}" y="{y + 3:.1f}" text-anchor="end" font-size="10">{r:.2f}</text>')
    out.append(f'<text x="{left + W / 2}" y="{H - 8}" text-anchor="middle" font-size="11">cost / session (log)</text>')
    windows = list(summary["windows"].items())
    for w, (fraction, strategies) in enumerate(windows):
        for s_name, s in strategies.items():
            x, y = x_of(s["per_session"], left), y_of(max(s["needed"], y_min), y_min)
            colour = ("#d62728" if s_name == "session"
                      else "#999" if s.get("over", 0) else "#1f77b4")
            fill = colour if w == 0 else "white"
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}" stroke="{colour}"/>')
            if w == 0:
                out.append(f'<text x="{x + 6:.1f}" y="{y - 4:.1f}" font-size="9">{escape(s_name)}</text>')
    legend = ", ".join(f"{'filled' if i == 0 else 'hollow'}: {float(f):.0%} window"
                       for i, (f, _) in enumerate(windows))
    out.append(f'<text x="{left + W / 2}" y="32" text-anchor="middle" font-size="10">{legend}</text>')
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("sets", nargs="+", help="NAME=SUMMARY.json")
    args = ap.parse_args()
    sets = [(name, json.loads(pathlib.Path(path).read_text()))
            for name, path in (s.split("=", 1) for s in args.sets)]
    low = min(s["needed"] for _, summary in sets for ws in summary["windows"].values() for s in ws.values())
    y_min = math.floor(low * 10) / 10
    width = len(sets) * W + (len(sets) - 1) * GAP
    body = []
    for i, (name, summary) in enumerate(sets):
        body += panel(name, summary, i * (W + GAP), y_min)
    body.append(f'<text x="6" y="{H / 2}" font-size="11" transform="rotate(-90 10 {H / 2})">'
                   'recall: needed identifiers sent verbatim</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H}" '
           f'font-family="sans-serif">\n' + "\n".join(body) + "\n</svg>\n")
    pathlib.Path(args.out).write_text(svg)


if __name__ == "__main__":
    main()
