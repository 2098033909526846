#!/usr/bin/env bash
# Fuzz gate (docs/reliability.md): builds fuzz/ with clang (libFuzzer + ASan + UBSan) and runs each
# target from its committed corpus for a bounded time. Any crash, sanitizer report or reference
# mismatch fails the gate; the failing input is left under build/fuzz/artifacts/ (add it to
# fuzz/corpus/<target>/ once fixed).
# Usage: tools/ci/fuzz_gate.sh [seconds per target, default 60]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
build=build/fuzz
lock=()
if command -v flock >/dev/null; then lock=(flock /tmp/fusex-build.lock); fi
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
"${lock[@]}" cmake -S fuzz -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
"${lock[@]}" cmake --build "$build" -j2
mkdir -p "$build/artifacts"
status=0
for target in fuzz_shape_view fuzz_planner; do
  name=${target#fuzz_}
  work="$build/corpus/$name"  # grows during the run; the committed seeds stay as they are
  mkdir -p "$work"
  echo "fuzz: $target for ${secs}s from fuzz/corpus/$name ($(ls "fuzz/corpus/$name" | wc -l) seeds)"
  if ! "$build/$target" -max_total_time="$secs" -max_len=256 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$build/artifacts/$name-" "$work" "fuzz/corpus/$name" > "$build/$name.log" 2>&1; then
    echo "fuzz: $target FAILED:"; grep -a -E "fuzz_|ERROR|runtime error|what\(\)|Test unit written" "$build/$name.log" | head -20
    status=1
  else
    grep -a -E "^stat::number_of_executed_units|DONE" "$build/$name.log" | tail -2
  fi
done
exit $status
