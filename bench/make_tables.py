#!/usr/bin/env python3
"""Prints Markdown tables from Google Benchmark JSON files (bench/results/*.json by default), one
table per file, with the GPU, date and commit each run recorded. docs/performance.md embeds them."""
import glob
import json
import os
import sys


def table(path):
    with open(path) as f:
        data = json.load(f)
    ctx = data.get("context", {})
    out = [f"#### `{os.path.basename(path)}`", "",
           f"GPU: {ctx.get('gpu', '?')}; date: {ctx.get('date', '?')}; commit: {ctx.get('commit', '?')}", "",
           ]
    benchmarks = data.get("benchmarks", [])
    # Runs timed in a steady stream (fusex_bench::time_steady) also carry the time of one call
    # timed alone from an idle stream.
    single = any("single_call_us" in b for b in benchmarks)
    out += ["| benchmark | time (us) | GB/s | ratio to copy | host us/call |" + (" one call alone (us) |" if single else ""),
            "| --- | ---: | ---: | ---: | ---: |" + (" ---: |" if single else "")]
    # With --benchmark_repetitions the file holds every repetition and the aggregates: print the
    # medians only.
    medians = any(b.get("aggregate_name") == "median" for b in benchmarks)
    for b in benchmarks:
        if medians and b.get("aggregate_name") != "median":
            continue
        if not medians and b.get("run_type") == "aggregate":
            continue
        t = b.get("real_time", 0)
        unit = b.get("time_unit", "us")
        scale = {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[unit]
        gbps = b.get("GBps")
        ratio = b.get("copy_ratio")
        host = b.get("host_us_per_call")
        us = t * scale
        # time_steady marks calls shorter than their submission: the time is the host's.
        name = b["name"] + (" (host-bound)" if b.get("host_bound") == 1 else "")
        row = "| {} | {} | {} | {} | {} |".format(
            name, f"{us:.3f}" if us < 1 else f"{us:.2f}",
            f"{gbps:.0f}" if gbps is not None else "",
            f"{ratio:.3f}" if ratio is not None else "",
            f"{host:.3f}" if host is not None else "")
        if single:
            one = b.get("single_call_us")
            row += " {} |".format(f"{one:.2f}" if one is not None else "")
        out.append(row)
    return "\n".join(out) + "\n"


def main():
    files = sys.argv[1:] or sorted(glob.glob(os.path.join(os.path.dirname(__file__), "results", "*.json")))
    print("\n".join(table(p) for p in files))


if __name__ == "__main__":
    main()
