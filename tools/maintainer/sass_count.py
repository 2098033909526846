#!/usr/bin/env python3
"""Instruction counts per kernel from `cuobjdump -sass` output (static counts: a proxy for the
issue-bound row kernels when no GPU is at hand).

    nvcc -O3 -arch=sm_90 --extended-lambda -I include -cubin -o k.cubin probe.cu
    cuobjdump -sass k.cubin > k.sass
    tools/maintainer/sass_count.py k.sass 'row_kernelIjLi8ELb1'      # regex on the mangled kernel name

Without a CUDA toolkit's cuobjdump (this project's CPU machine has none), PyPI's
`nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm` wheels carry both (unzip them; put nvdisasm's
folder on PATH)."""
import collections
import re
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    text = open(sys.argv[1], encoding="utf-8").read()
    for body in re.split(r"\n\s+Function : ", text)[1:]:
        name = body.split("\n", 1)[0]
        if not re.search(sys.argv[2], name):
            continue
        ops = collections.Counter()
        for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", body):
            ops[m.group(2).split(".")[0]] += 1
        print(f"{sum(ops.values())} {name}")
        print("   " + " ".join(f"{k}:{v}" for k, v in ops.most_common(30)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
