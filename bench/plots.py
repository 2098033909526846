#!/usr/bin/env python3
"""Plots for docs/performance.md, from committed JSON only (never from numbers typed in):

  bench/plots.py bandwidth [JSON...]   bytes/s against bytes moved per call for relu_bias, softmax
                                       and layer_norm beside the device-to-device copy, from the
                                       Google Benchmark JSON (default: the newest bench_elementwise
                                       and bench_reduce files in bench/results/)
                                       -> docs/img/bandwidth.png
  bench/plots.py tour FILE.json        fusex-tour's time per step of each version and workload,
                                       from `fusex-tour --json FILE.json` -> docs/img/tour.png

`--out PNG` changes the output file. Needs matplotlib (python3 -m pip install matplotlib)."""
import argparse
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Benchmark name (without template arguments' spaces) -> plotted family. float32 only, and only the
# default strategy of each (relu_bias /0: no grid cap; rows /1: the row kept on chip, static path),
# so that each operation is one line; the other strategies are in the tables.
FAMILIES = [
    ("copy (cudaMemcpyAsync D2D)", re.compile(r"^bm_copy/")),
    ("relu(x + bias), fused", re.compile(r"^bm_relu_bias_fused<float>/0/")),
    ("softmax (rows)", re.compile(r"^bm_rows<float, softmax_k>/\d+/\d+/1/")),
    ("layer_norm (rows)", re.compile(r"^bm_rows<float, layer_norm_k>/\d+/\d+/1/")),
]


def newest(pattern):
    """The run recorded last (Google Benchmark's context date; file names carry commit hashes,
    which do not sort by time)."""
    def when(path):
        try:
            with open(path) as f:
                return json.load(f).get("context", {}).get("date", "")
        except (OSError, ValueError):
            return ""
    files = sorted(glob.glob(os.path.join(HERE, "results", pattern)), key=when)
    return files[-1:] if files else []


def bandwidth_points(files):
    """{family: [(bytes per call, bytes/s, name)]} from the JSON files; bytes per call is
    bytes_per_second x time per iteration, so it needs no knowledge of each benchmark's arguments."""
    points = {label: [] for label, _ in FAMILIES}
    context = None
    for path in files:
        with open(path) as f:
            data = json.load(f)
        context = context or data.get("context", {})
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" or not b.get("bytes_per_second"):
                continue
            scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
            seconds = b["real_time"] * scale
            for label, rx in FAMILIES:
                if rx.search(b["name"]):
                    points[label].append((b["bytes_per_second"] * seconds, b["bytes_per_second"], b["name"]))
    return points, context or {}


def plot_bandwidth(files, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    points, ctx = bandwidth_points(files)
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    markers = ["s", "o", "^", "D"]
    for (label, pts), m in zip(points.items(), markers):
        if not pts:
            continue
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] / 1e12 for p in pts], marker=m, linestyle="-" if len(pts) > 1 else "",
                label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes moved per call (read + written)")
    ax.set_ylabel("TB/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("fusex kernels beside the copy: {} ({}, commit {})".format(
        ctx.get("gpu", "?"), str(ctx.get("date", "?"))[:10], ctx.get("commit", "?")), fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out} from {', '.join(os.path.relpath(f, ROOT) for f in files)}")


def plot_tour(path, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        data = json.load(f)
    gpu = data.get("backend") == "gpu"
    key = "gpu_us_per_step" if gpu else "host_us_per_step"
    workloads = data["workloads"]
    versions = [v["version"] for v in workloads[0]["versions"]]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    width = 0.8 / len(versions)
    for j, name in enumerate(versions):
        xs, ys = [], []
        for i, w in enumerate(workloads):
            v = w["versions"][j]
            if v.get("measured") and v.get(key) is not None:
                xs.append(i + (j - (len(versions) - 1) / 2) * width)
                ys.append(v[key])
        bars = ax.bar(xs, ys, width=width, label=name)
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.0f}", (x, y), ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels([w["name"] for w in workloads])
    ax.set_ylabel(("GPU" if gpu else "host-backend") + " us per step (log)")
    ax.legend(fontsize=8)
    cfg = data.get("config", {})
    ax.set_title("fusex-tour on {}: batch {}, hidden {}".format(data.get("device", "?"), cfg.get("batch"),
                                                               cfg.get("hidden")), fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out} from {os.path.relpath(path, ROOT) if os.path.isabs(path) else path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["bandwidth", "tour"])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--out")
    a = ap.parse_args()
    os.makedirs(os.path.join(ROOT, "docs", "img"), exist_ok=True)
    if a.what == "bandwidth":
        files = a.files or (newest("bench_elementwise-*.json") + newest("bench_reduce-*.json"))
        if not files:
            sys.exit("plots.py: no benchmark JSON in bench/results/")
        plot_bandwidth(files, a.out or os.path.join(ROOT, "docs", "img", "bandwidth.png"))
    else:
        if len(a.files) != 1:
            sys.exit("plots.py tour: give the JSON file written by fusex-tour --json")
        plot_tour(a.files[0], a.out or os.path.join(ROOT, "docs", "img", "tour.png"))


if __name__ == "__main__":
    main()
