#!/usr/bin/env python3
"""Plots of `tile-gpu bench` runs: one PNG per run, a bar per benchmark row
with its ratio to the anchor measured in the same run (rows without an
anchor, measured by the anchor scripts instead, are left out); and, for
the rows with a size and a series (`bench sweep`'s GEMM, `bench memory`'s
softmax and layernorm), NAME-lines-UNIT.png per unit: throughput against
size, one line per implementation and a dashed one for the anchor
measured beside it.

    TILE_BENCH_JSON=run.json ./gpu-dist/tile-gpu --root . bench gemm
    python3 bench/plot.py run.json [more.json ...] [--out DIR]

Writes DIR/NAME.png for each NAME.json (DIR defaults to the JSON file's
directory). Needs matplotlib; without it, says so and exits 2.
"""
import json
import os
import sys


def load_rows(path):
    with open(path) as f:
        data = json.load(f)
    rows = [r for r in data.get("rows", []) if r.get("anchor", 0) > 0 and r.get("ratio", 0) > 0]
    return data.get("device", "GPU"), rows


def plot_lines(path, out_dir, plt):
    """NAME-lines-UNIT.png from the rows with a size, one per unit: value
    against size per series, and per series its anchor's line (dashed, the
    same colour)."""
    with open(path) as f:
        data = json.load(f)
    points = [r for r in data.get("rows", []) if r.get("size", 0) > 0 and r.get("series")]
    name = os.path.splitext(os.path.basename(path))[0]
    units = []
    for r in points:
        if r.get("unit", "") not in units:
            units.append(r.get("unit", ""))
    for unit in units:
        rows = [r for r in points if r.get("unit", "") == unit]
        slug = "".join(ch for ch in unit if ch.isalnum()) or "value"
        target = os.path.join(out_dir or os.path.dirname(os.path.abspath(path)), f"{name}-lines-{slug}.png")
        series = []
        for r in rows:
            if r["series"] not in series:
                series.append(r["series"])
        fig, ax = plt.subplots(figsize=(9, 5))
        colors = ["#1b6", "#26c", "#c52", "#a3a", "#888"]
        for i, s in enumerate(series):
            pts = sorted((r["size"], r["value"], r["anchor"], r.get("anchor_series", "anchor")) for r in rows
                         if r["series"] == s)
            c = colors[i % len(colors)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=c, label=s)
            if any(p[2] > 0 for p in pts):
                ax.plot([p[0] for p in pts], [p[2] for p in pts], "x--", color=c, alpha=0.7,
                        label=f"{pts[0][3]}, timed beside it")
        ax.set_xlabel(rows[0].get("size_name", "size"))
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.set_title(f"{name} ({data.get('device', 'GPU')})", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        fig.savefig(target, dpi=120)
        plt.close(fig)
        print(f"{path}: {len(rows)} points on {len(series)} lines -> {target}")


def plot(path, out_dir, plt):
    plot_lines(path, out_dir, plt)
    device, rows = load_rows(path)
    name = os.path.splitext(os.path.basename(path))[0]
    target = os.path.join(out_dir or os.path.dirname(os.path.abspath(path)), name + ".png")
    if not rows:
        print(f"{path}: no rows with an anchor, nothing to plot")
        return
    height = max(2.5, 0.28 * len(rows) + 1.2)
    fig, ax = plt.subplots(figsize=(11, height))
    labels = [r["name"] for r in rows]
    ratios = [r["ratio"] for r in rows]
    colors = ["#2a7" if x >= 1.0 else "#c73" for x in ratios]
    ax.barh(range(len(rows)), ratios, color=colors)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ratio to the anchor measured in the same run")
    ax.set_title(f"{name} ({device})", fontsize=9)
    for i, x in enumerate(ratios):
        ax.text(x, i, f" {x:.3f}", va="center", fontsize=7)
    fig.tight_layout()
    fig.savefig(target, dpi=120)
    plt.close(fig)
    print(f"{path}: {len(rows)} rows -> {target}")


def main(argv):
    out_dir = None
    paths = []
    i = 1
    while i < len(argv):
        if argv[i] == "--out" and i + 1 < len(argv):
            out_dir = argv[i + 1]
            i += 2
            continue
        paths.append(argv[i])
        i += 1
    if not paths:
        print(__doc__.strip())
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench/plot.py needs matplotlib (pip install matplotlib)")
        return 2
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    for p in paths:
        plot(p, out_dir, plt)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
