#!/usr/bin/env bash
# nvcc wall time of fusex translation units against a hand-written relu+bias kernel TU, with the
# build's Release flags, alternating the TUs, RUNS rounds (default 2), one compile at a time:
#   hand      bench/compile_time/hand_relu_bias.cu   (the baseline: no fusex)
#   empty     bench/compile_time/fusex_empty.cu      (includes <fusex/fusex.hpp>, evaluates nothing)
#   relu_bias examples/relu_bias/relu_bias.cu
#   softmax   examples/softmax_layer_norm/softmax_layer_norm.cu
# each fusex TU also with FUSEX_SEPARATE_COMPILATION (names ending in _sc).
# Prints each wall time, its ratio to the hand kernel's time of the same round, and nvcc's phases
# (--time: cudafe++, cicc, ptxas, host compiler). Keep the machine otherwise idle.
# Usage: bench/compile_time/compile_time.sh [> bench/results/compile_time-<machine>.txt]
# Environment: NVCC (default nvcc, or /usr/local/cuda/bin/nvcc), CUDA_ARCH (default sm_90 as the
# build makes it: compute_90 PTX + sm_90 SASS), RUNS (default 2), EXTRA (more nvcc flags).
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=${CUDA_ARCH:-"--generate-code=arch=compute_90,code=[compute_90,sm_90]"}
RUNS=${RUNS:-2}
# The flags of CMake's Release build of fusex's own targets (cmake/fusex_warnings.cmake adds the
# warning flags; CMAKE_CUDA_FLAGS_RELEASE is -O3 -DNDEBUG).
flags=(-O3 -DNDEBUG "$arch" --extended-lambda -Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror -Iinclude)
# EXTRA is split on spaces on purpose: several flags.
# shellcheck disable=SC2206
extra=(${EXTRA:-})
# Each fusex TU twice: header-only (the default), and with FUSEX_SEPARATE_COMPILATION (suffix _sc:
# what a user of the CMake target fusex::compiled compiles; the library's one source file is built
# once per project, not per TU, and is not counted here).
names=(hand empty empty_sc relu_bias relu_bias_sc softmax softmax_sc)
files=(bench/compile_time/hand_relu_bias.cu bench/compile_time/fusex_empty.cu bench/compile_time/fusex_empty.cu
  examples/relu_bias/relu_bias.cu examples/relu_bias/relu_bias.cu
  examples/softmax_layer_norm/softmax_layer_norm.cu examples/softmax_layer_norm/softmax_layer_norm.cu)
mode_flags() { case $1 in *_sc) echo -DFUSEX_SEPARATE_COMPILATION ;; esac; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# fusex compile time, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# $("$NVCC" --version | tail -n1); host $(g++ --version | head -n1); $(nproc) cores;" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# nvcc ${flags[*]} ${extra[*]} -c FILE"
printf '%-12s %4s %9s %8s   %s\n' tu run wall_s x_hand "phases (s)"
declare -A sum
for ((r = 1; r <= RUNS; ++r)); do
  hand=""
  for i in "${!names[@]}"; do
    n=${names[$i]}
    rm -f "$tmp/t.csv"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2046  # no flag or one
    "$NVCC" "${flags[@]}" "${extra[@]}" $(mode_flags "$n") --time "$tmp/t.csv" -c "${files[$i]}" -o "$tmp/$n.o"
    t1=$(date +%s.%N)
    wall=$(echo "$t1 - $t0" | bc -l)
    [ -z "$hand" ] && hand=$wall
    ratio=$(echo "$wall / $hand" | bc -l)
    sum[$n]=$(echo "${sum[$n]:-0} + $wall" | bc -l)
    # --time's CSV: one row per phase, its name in column 2 and milliseconds in column 7.
    phases=$(awk -F' *, *' 'NR > 1 {
      p = $2; if (p ~ /preprocessing/) p = "preprocess"; else if (p ~ /compiling/) p = "host"; else if (p ~ /cudafe/) p = "cudafe++"
      t[p] += $7 } END { n = split("preprocess cudafe++ cicc ptxas host", o, " ")
      for (i = 1; i <= n; ++i) printf "%s %.2f  ", o[i], t[o[i]] / 1000 }' "$tmp/t.csv")
    printf '%-12s %4d %9.2f %8.2f   %s\n' "$n" "$r" "$wall" "$ratio" "$phases"
  done
done
echo "# mean over $RUNS rounds, ratio of the means"
for n in "${names[@]}"; do
  printf '%-12s mean %9.2f %8.2f\n' "$n" "$(echo "${sum[$n]} / $RUNS" | bc -l)" "$(echo "${sum[$n]} / ${sum[hand]}" | bc -l)"
done
