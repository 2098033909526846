#!/usr/bin/env bash
# The GPU reliability gates (docs/reliability.md), one command on a machine with an NVIDIA GPU:
#   1. builds everything (Release, sm_90 unless CUDAARCHS says otherwise) with the gate tests on;
#   2. runs every GPU test program (ctest -L gpu) under compute-sanitizer memcheck, racecheck,
#      synccheck and initcheck, each run bounded by SAN_TIMEOUT seconds, and summarises the reports
#      per tool;
#   3. runs the allocator + graph stress program (label stress, STRESS_SECONDS, default 60);
#   4. runs the >2^31-element test (label large).
# Logs go to $OUT/gpu_gates/ (OUT defaults to /tmp/out): summary.txt is the table to copy into
# docs/reliability.md; <tool>/<test>.log are compute-sanitizer's reports.
# Catch2 and Google Benchmark come from Debian packages carried in .debs/ (as tools/device_run.sh).
# Exit status: 0 when every gate is clean, 1 otherwise. About 8 minutes on an H200 with 16 cores.
# Environment: PREBUILT=1 runs prebuilt/ (tools/pack_prebuilt.sh) instead of building; TOOLS (the
# sanitizer tools, default all four), PARALLEL (programs at once, default 4), SAN_TIMEOUT,
# STRESS_SECONDS, NO_STRESS=1 (sanitizers only). Also packs $OUT/gpu_gates.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
log="$OUT/gpu_gates"
mkdir -p "$log" /tmp/prefix
for f in .debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/prefix; done
export CMAKE_PREFIX_PATH=/tmp/prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export PATH=/usr/local/cuda/bin:$PATH
SAN_TIMEOUT=${SAN_TIMEOUT:-240}
STRESS_SECONDS=${STRESS_SECONDS:-60}
jobs=$(nproc)
build=build/gpu-gates
commit=${FUSEX_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
summary="$log/summary.txt"
start=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - start ))s] $*" | tee -a "$log/steps.log"; }
# Everything so far as one archive (the device tool fetches files, not folders), after each step
# and at exit, so a run cut short still returns what it did.
pack() { tar -czf "$OUT/gpu_gates.tar.gz" -C "$OUT" gpu_gates 2>/dev/null; true; }
trap pack EXIT
{
  echo "fusex GPU gates: commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/device: /'
  echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | grep -i version | head -1)"
} > "$summary"
status=0

if [ -n "${PREBUILT:-}" ]; then
  # A build made elsewhere for this GPU (tools/pack_prebuilt.sh), unpacked at its own path.
  build=$(cat prebuilt/build_dir)
  mkdir -p "$build" && tar -xJf prebuilt/build.tar.xz -C "$build" || { echo "unpack failed"; exit 1; }
  export LD_LIBRARY_PATH=/tmp/prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  echo "build: prebuilt ($build)" >> "$summary"
  stamp "prebuilt unpacked"
else
  stamp "configure + build ($jobs jobs)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_GPU_GATES=ON > "$log/build.log" 2>&1 || { tail -40 "$log/build.log"; exit 1; }
  if ! cmake --build "$build" -j "$jobs" -- -k 0 >> "$log/build.log" 2>&1; then
    echo "build: FAILED (see build.log)" | tee -a "$summary"; grep -E "FAILED|error" "$log/build.log" | head -20; status=1
  fi
  stamp "build done"
fi

# The GPU test programs and their arguments, from CTest (examples included).
mapfile -t cmds < <(cd "$build" && ctest -L gpu -N --show-only=json-v1 | python3 -c '
import json, shlex, sys
for t in json.load(sys.stdin)["tests"]:
    if any(p["name"] == "DISABLED" and p["value"] for p in t.get("properties", [])): continue
    print(t["name"] + "\t" + " ".join(shlex.quote(c) for c in t["command"]))')
stamp "${#cmds[@]} GPU test programs x tools: ${TOOLS:-memcheck racecheck synccheck initcheck}"

# Tests that fill the device or measure its free memory run alone; the others run 4 at a time.
serial_re='^(test_arena_gpu|test_arena_stress_gpu)$'
run_one() {  # run_one tool name command...
  local tool=$1 name=$2; shift 2
  mkdir -p "$log/$tool"
  local extra=()
  # The error tests provoke CUDA API errors on purpose (out of memory, capture misuse) and assert
  # the exception fusex throws for each; every other API error also surfaces as an exception (every
  # call is checked), so memcheck reports memory errors only.
  [ "$tool" = memcheck ] && extra=(--leak-check no --report-api-errors no)
  # racecheck serialises every kernel and tracks every shared-memory access: the two longest
  # programs run fewer repetitions of the same code paths under it (later flags win in the tour).
  local env=()
  if [ "$tool" = racecheck ]; then
    case $name in
      example.fusex-tour) set -- "$@" --steps 2 --warmup 1 --blocks 10 --layers 20 ;;
      test_arena_stress_gpu) env=(FUSEX_ARENA_STRESS_ITERATIONS=400) ;;
    esac
  fi
  timeout -k 10 "$SAN_TIMEOUT" env "${env[@]}" compute-sanitizer --tool "$tool" --target-processes all "${extra[@]}" --error-exitcode 99 --print-limit 50 \
    --log-file "$log/$tool/$name.san.log" bash -c "$*" > "$log/$tool/$name.log" 2>&1
  echo $? > "$log/$tool/$name.rc"
}
export -f run_one; export log SAN_TIMEOUT
TOOLS=${TOOLS:-memcheck racecheck synccheck initcheck}
for tool in $TOOLS; do
  : > "$log/$tool.list"
  for c in "${cmds[@]}"; do
    name=${c%%$'\t'*}; cmd=${c#*$'\t'}
    if [[ $name =~ $serial_re ]]; then run_one "$tool" "$name" "$cmd"; else printf '%s\t%s\n' "$name" "$cmd" >> "$log/$tool.list"; fi
  done
  while IFS=$'\t' read -r name cmd; do
    printf '%s\0%s\0%s\0' "$tool" "$name" "$cmd"
  done < "$log/$tool.list" | xargs -0 -n 3 -P "${PARALLEL:-4}" bash -c 'run_one "$0" "$1" "$2"'
  stamp "$tool done"; pack
done

{
  echo
  echo "| tool | programs | clean | with reports (errors) | failed/timed out | skipped |"
  echo "| --- | --- | --- | --- | --- | --- |"
} >> "$summary"
for tool in $TOOLS; do
  clean=0; dirty=0; errs=0; bad=0; skipped=0; n=0; details=""
  for rcf in "$log/$tool"/*.rc; do
    [ -e "$rcf" ] || continue
    n=$((n + 1)); name=$(basename "$rcf" .rc); rc=$(cat "$rcf")
    e=$(grep -hoE "ERROR SUMMARY: [0-9]+" "$log/$tool/$name.san.log" 2>/dev/null | awk '{s+=$3} END {print s+0}')
    if [ "$rc" = 77 ]; then skipped=$((skipped + 1))
    elif [ "$e" -gt 0 ] || [ "$rc" = 99 ]; then dirty=$((dirty + 1)); errs=$((errs + e)); details+=" $name($e)"
    elif [ "$rc" != 0 ]; then bad=$((bad + 1)); details+=" $name(rc=$rc)"
    else clean=$((clean + 1)); fi
  done
  echo "| $tool | $n | $clean | $dirty ($errs) | $bad | $skipped |" >> "$summary"
  [ -n "$details" ] && echo "  $tool:$details" >> "$summary.details" && status=1
done
[ -e "$summary.details" ] && { echo; cat "$summary.details"; } >> "$summary"

if [ -n "${NO_STRESS:-}" ]; then stamp "done (sanitizers only), status $status"; cat "$summary"; exit $status; fi
stamp "stress (${STRESS_SECONDS}s)"
(cd "$build" && FUSEX_STRESS_SECONDS=$STRESS_SECONDS ctest -L stress --output-on-failure) > "$log/stress.log" 2>&1
rc=$?; echo "stress: exit $rc; $(grep -ho 'stress: .*' "$log/stress.log" | tail -1)" >> "$summary"; [ $rc = 0 ] || status=1
stamp "large"
(cd "$build" && ctest -L large --output-on-failure) > "$log/large.log" 2>&1
rc=$?; echo "large (>2^31 elements): exit $rc; $(grep -hE 'SKIPPED|passed|failed' "$log/large.log" | tail -2 | tr '\n' ' ')" >> "$summary"; [ $rc = 0 ] || status=1
stamp "done, status $status"
cat "$summary"
exit $status
