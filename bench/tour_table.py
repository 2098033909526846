#!/usr/bin/env python3
"""Writes fusex-tour's table into README.md from a `fusex-tour --json FILE` run: the table after
the `<!-- fusex-tour table` marker is replaced (never typed in by hand).
Usage: bench/tour_table.py bench/results/fusex_tour-DATE-COMMIT.json [README.md]"""
import json
import os
import re
import sys

NAMES = {"chain": "chain", "transformer": "transformer block", "mlp": "MLP"}


def kernels(n):
    """A kernel count as written: an integer when it is one (350, not 350.0 or 3.5e+02)."""
    return str(int(n)) if float(n).is_integer() else "{:.1f}".format(n)


def table(data, source):
    cfg = data.get("config", {})
    out = [f"<!-- fusex-tour table: filled by bench/tour_table.py from {source} (never typed in by hand) -->",
           f"{data.get('device', '?')}, batch {cfg.get('batch')}, hidden {cfg.get('hidden')}; each cell: kernels per "
           "step, GPU us per step, speedup over (1).",
           "",
           "| workload | (1) unfused | (2) fused | (3) fused + arena | (4) fused + arena + graph |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for w in data.get("workloads", []):
        cells = []
        for v in w.get("versions", []):
            if not v.get("measured"):
                cells.append("not measured")
                continue
            cells.append("{} kernels, {:.1f} us, {:.1f}x".format(kernels(v["kernels_per_step"]), v["gpu_us_per_step"],
                                                                v["speedup"]))
        out.append("| {} ({}) | {} |".format(NAMES.get(w["name"], w["name"]), w.get("shape", ""), " | ".join(cells)))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    readme = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "README.md")
    with open(path) as f:
        data = json.load(f)
    lines = open(readme).read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("<!-- fusex-tour table"))
    # The block ends at the first line after the table's rows.
    end = start + 1
    seen_rows = False
    while end < len(lines):
        if lines[end].startswith("|"):
            seen_rows = True
        elif seen_rows:
            break
        end += 1
    source = "bench/results/" + os.path.basename(path)
    lines[start:end] = table(data, source)
    open(readme, "w").write("\n".join(lines))


if __name__ == "__main__":
    main()
