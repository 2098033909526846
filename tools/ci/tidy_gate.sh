#!/usr/bin/env bash
# clang-tidy gate (docs/reliability.md): every header under include/fusex in a host translation unit
# of its own, plus the two fuzz targets (which instantiate the planner, the evaluators, the host
# backend and the reductions), checked with the repository's .clang-tidy; findings in fusex headers
# are errors. Usage: tools/ci/tidy_gate.sh [jobs, default 2]
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=${1:-2}
out=build/tidy
mkdir -p "$out/tu"
cuda_inc=/usr/local/cuda/include
[ -d "$cuda_inc" ] || cuda_inc=$(dirname "$(dirname "$(command -v nvcc)")")/include
flags=(-std=c++17 -Iinclude -isystem "$cuda_inc/cccl" -isystem "$cuda_inc")
tus=()
while IFS= read -r h; do
  rel=${h#include/}
  tu="$out/tu/$(echo "$rel" | tr '/.' '__').cpp"
  printf '#include <%s>\n' "$rel" > "$tu.new"
  cmp -s "$tu.new" "$tu" 2>/dev/null && rm "$tu.new" || mv "$tu.new" "$tu"
  tus+=("$tu")
done < <(find include/fusex -name '*.hpp' | sort)
tus+=(fuzz/fuzz_shape_view.cpp fuzz/fuzz_planner.cpp)
lock=()
command -v flock >/dev/null && lock=(flock /tmp/fusex-build.lock)
echo "tidy: ${#tus[@]} translation units (${jobs} at a time)"
printf '%s\n' "${tus[@]}" | "${lock[@]}" xargs -P "$jobs" -I{} sh -c \
  'clang-tidy --quiet "$0" -- "$@" > "build/tidy/$(basename "$0").log" 2>&1 || { echo "tidy: findings in $0:"; grep -E "warning:|error:" "build/tidy/$(basename "$0").log" | sort -u; exit 1; }' {} "${flags[@]}" \
  && echo "tidy: zero findings"
