#!/usr/bin/env python3
"""Compares the old and new Google Benchmark JSON files and fusex-tour JSON files of a
tools/maintainer/device_ab.sh run (<program>-<commit>-{old,new}-r1.json in one folder): per case
the new/old real_time and bytes/s ratios, the geometric means, and every case more than 3% slower.
Usage: tools/maintainer/ab_compare.py FOLDER > FOLDER/compare.txt"""
import json, math, sys, glob, os
D = sys.argv[1] if len(sys.argv) > 1 else '/tmp/gpu-ab/last'
THR = 1.03
def gm(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float('nan')
def bench(prog):
    o = glob.glob(f'{D}/{prog}-*-old-r1.json'); n = glob.glob(f'{D}/{prog}-*-new-r1.json')
    print(f'== {prog}')
    if not o or not n:
        print(f'   missing JSON: old={[os.path.basename(x) for x in o]} new={[os.path.basename(x) for x in n]}'); return
    lo = {b['name']: b for b in json.load(open(o[0]))['benchmarks'] if b.get('run_type') == 'iteration'}
    ln = {b['name']: b for b in json.load(open(n[0]))['benchmarks'] if b.get('run_type') == 'iteration'}
    only_o = sorted(set(lo) - set(ln)); only_n = sorted(set(ln) - set(lo))
    if only_o: print(f'   only in old: {only_o}')
    if only_n: print(f'   only in new: {only_n}')
    rt, bw, slow, errs = [], [], [], []
    print(f'   {"name":60s} {"old_rt":>12s} {"new_rt":>12s} unit  rt_ratio  bps_ratio')
    for k in [k for k in lo if k in ln]:
        a, b = lo[k], ln[k]
        if a.get('error_occurred') or b.get('error_occurred'):
            errs.append((k, a.get('error_message'), b.get('error_message'))); continue
        assert a.get('time_unit') == b.get('time_unit')
        r = b['real_time'] / a['real_time']; rt.append(r)
        br = ''
        if 'bytes_per_second' in a and 'bytes_per_second' in b and a['bytes_per_second']:
            q = b['bytes_per_second'] / a['bytes_per_second']; bw.append(q); br = f'{q:9.4f}'
        print(f'   {k:60s} {a["real_time"]:12.4f} {b["real_time"]:12.4f} {a.get("time_unit",""):4s} {r:9.4f} {br}')
        if r > THR: slow.append((k, a['real_time'], b['real_time'], a.get('time_unit'), r))
    for e in errs: print(f'   ERROR in {e}')
    print(f'   cases compared: {len(rt)}; geomean real_time ratio new/old = {gm(rt):.4f}'
          + (f'; geomean bytes_per_second ratio = {gm(bw):.4f} ({len(bw)} cases)' if bw else ''))
    print(f'   >3% slower (real_time ratio > {THR}): {len(slow)}')
    for s in slow: print(f'     {s[0]}: old {s[1]:.4f} {s[3]}, new {s[2]:.4f} {s[3]}, ratio {s[4]:.4f}')
def tour():
    o = glob.glob(f'{D}/fusex_tour-*-old-r1.json'); n = glob.glob(f'{D}/fusex_tour-*-new-r1.json')
    print('== fusex-tour')
    if not o or not n: print('   missing JSON'); return
    jo, jn = json.load(open(o[0])), json.load(open(n[0]))
    if jo.get('config') != jn.get('config'): print(f'   config differs: {jo.get("config")} vs {jn.get("config")}')
    def flat(j):
        d = {}
        for w in j['workloads']:
            for v in w['versions']:
                d[(w['name'], v['version'])] = v
        return d
    fo, fn = flat(jo), flat(jn)
    for metric in ('gpu_us_per_step', 'host_us_per_step'):
        rs, slow = [], []
        print(f'   -- {metric}')
        for k in fo:
            if k not in fn: print(f'   only in old: {k}'); continue
            a, b = fo[k].get(metric), fn[k].get(metric)
            okflags = (fo[k].get('ok'), fn[k].get('ok'))
            if not a or not b: print(f'   {k}: n/a ({a}, {b})'); continue
            r = b / a; rs.append(r)
            print(f'   {k[0]:12s} {k[1]:28s} old {a:10.3f} new {b:10.3f} ratio {r:7.4f} ok={okflags} kernels {fo[k].get("kernels_per_step")}/{fn[k].get("kernels_per_step")}')
            if r > THR: slow.append((k, a, b, r))
        print(f'   geomean {metric} ratio new/old = {gm(rs):.4f} over {len(rs)} cases; >3% slower: {len(slow)}')
        for s in slow: print(f'     {s[0]}: old {s[1]:.3f} us, new {s[2]:.3f} us, ratio {s[3]:.4f}')
    for k in fn:
        if k not in fo: print(f'   only in new: {k}')
for p in ('bench_elementwise', 'bench_reduce', 'bench_matmul'): bench(p)
tour()
