#!/usr/bin/env python3
"""Plots of `tile-gpu bench` runs: one PNG per run, a bar per benchmark row
with its ratio to the anchor measured in the same run (rows without an
anchor, measured by the anchor scripts instead, are left out).

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


def plot(path, out_dir, plt):
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
