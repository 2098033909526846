#!/usr/bin/env bash
# The GPU reliability gates (docs/reliability.md), one command on a machine with an NVIDIA GPU:
#   1. builds everything (sm_90 unless CUDAARCHS says otherwise) with the gate tests on, or takes a
#      build made before (BUILD_DIR, PREBUILT);
#   2. runs every GPU test (ctest -L gpu: both launch paths, `name` and `name.graph`, each with its
#      CTest ENVIRONMENT) under compute-sanitizer memcheck, racecheck, synccheck and initcheck, each
#      run bounded by SAN_TIMEOUT seconds, and summarises the reports per tool;
#   3. runs the allocator + graph stress test (label stress, STRESS_SECONDS, default 60);
#   4. runs the >2^31-element tests (label large, both launch paths).
#   A stress or large run still going after 540 s (of its 600) is taken as hung: its threads' stacks
#   (cuda-gdb attached) and the machine's state go to <test>.hang.txt before the timeout kills it.
# A gate that does not run is not a gate that passed: a test that exits 77 (skipped: no usable GPU,
# or not enough free memory) FAILS the gate, and the summary says why.
# Logs go to $OUT/gpu_gates/ (OUT defaults to /tmp/out): summary.txt is the table to copy into
# docs/reliability.md; <tool>/<test>.san.log are compute-sanitizer's reports, <tool>/<test>.log the
# program's output. Catch2 and Google Benchmark may come from Debian packages carried in .debs/.
# Exit status: 0 when every gate ran and is clean, 1 otherwise.
# About 8 minutes on an H200 host with 16 cores (sanitizers ~5, build ~4 when not prebuilt).
#
# Environment:
#   BUILD_TYPE   Release (default): the Release flags, NDEBUG defined.
#                ReleaseAsserts: Release optimisation without -DNDEBUG (the arena's thorough checks
#                on, as in CMake's default build type); build folder build/gpu-gates-asserts.
#                Any other CMake build type (Debug, RelWithDebInfo) is passed through.
#   BUILD_DIR    an already configured and built folder to use as it is (no configure, no build);
#                default build/gpu-gates[-asserts], configured and built here.
#   PREBUILT=1   unpack prebuilt/ (tools/maintainer/pack_prebuilt.sh) and use it instead of building.
#   TOOLS        sanitizer tools (default: memcheck racecheck synccheck initcheck)
#   PARALLEL     sanitizer runs at once (default 8; tests marked RUN_SERIAL run alone first)
#   SAN_TIMEOUT  seconds per sanitizer run (default 420)     STRESS_SECONDS (default 60)
#   NO_STRESS=1  sanitizers only (no stress, no large)
#   ONLY         regex of test names to run (default: all)
#   SKIP         regex of test names not to run (default: none): each one left out fails the run
#                (exit 1) and is named in the summary, so a partial run never reads as clean
#   DRY_RUN=1    print the runs (tool, test, environment, command) and exit 0; builds nothing
# Also packs $OUT/gpu_gates.tar.gz after each step.
# Testing this script without a GPU: GPU_GATES_PATH_FIRST=DIR puts DIR first on PATH (a fake
# compute-sanitizer and nvidia-smi there), with BUILD_DIR pointing at any configured build.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
log="$OUT/gpu_gates"
BUILD_TYPE=${BUILD_TYPE:-Release}
TOOLS=${TOOLS:-memcheck racecheck synccheck initcheck}
PARALLEL=${PARALLEL:-8}
SAN_TIMEOUT=${SAN_TIMEOUT:-420}
STRESS_SECONDS=${STRESS_SECONDS:-60}
ONLY=${ONLY:-}
SKIP=${SKIP:-}
DRY_RUN=${DRY_RUN:-}
mkdir -p "$log" /tmp/prefix
for f in .debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/prefix; done
export CMAKE_PREFIX_PATH=/tmp/prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export LD_LIBRARY_PATH=/tmp/prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=${GPU_GATES_PATH_FIRST:+$GPU_GATES_PATH_FIRST:}/usr/local/cuda/bin:$PATH
jobs=$(nproc)
commit=${FUSEX_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
summary="$log/summary.txt"
rm -f "$summary.details"
start=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - start ))s] $*" | tee -a "$log/steps.log"; }
# Everything so far as one archive (the device tool fetches files, not folders), after each step
# and at exit, so a run cut short still returns what it did.
pack() { [ -n "$DRY_RUN" ] || tar -czf "$OUT/gpu_gates.tar.gz" -C "$OUT" gpu_gates 2>/dev/null; true; }
trap pack EXIT
fail() { echo "  $*" >> "$summary.details"; status=1; }
{
  echo "fusex GPU gates: commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  if gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null) && [ -n "$gpu" ]; then
    echo "device: $gpu"
  else
    echo "device: NONE (nvidia-smi found no GPU): every GPU test will skip, so every gate fails"
  fi
  echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | grep -i version | head -1)"
} > "$summary"
status=0

case $BUILD_TYPE in
  Release) cmake_type=(-DCMAKE_BUILD_TYPE=Release); default_build=build/gpu-gates ;;
  ReleaseAsserts)
    # Release optimisation, assertions and the arena's thorough checks on (no -DNDEBUG).
    cmake_type=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_FLAGS_RELEASE=-O3" "-DCMAKE_CXX_FLAGS_RELEASE=-O3")
    default_build=build/gpu-gates-asserts ;;
  *) cmake_type=("-DCMAKE_BUILD_TYPE=$BUILD_TYPE"); default_build=build/gpu-gates-$BUILD_TYPE ;;
esac

if [ -n "${PREBUILT:-}" ]; then
  # A build made elsewhere for this GPU (tools/maintainer/pack_prebuilt.sh), unpacked at its own path.
  build=$(cat prebuilt/build_dir)
  mkdir -p "$build" && tar -xJf prebuilt/build.tar.xz -C "$build" || { echo "gpu_gates: unpacking prebuilt/ failed"; exit 1; }
  echo "build: prebuilt ($build)" >> "$summary"
  stamp "prebuilt unpacked"
elif [ -n "${BUILD_DIR:-}" ]; then
  build=$BUILD_DIR
  [ -f "$build/CTestTestfile.cmake" ] || { echo "gpu_gates: BUILD_DIR=$build is not a configured build folder (no CTestTestfile.cmake)"; exit 1; }
  echo "build: given ($build), used as it is" >> "$summary"
elif [ -n "$DRY_RUN" ]; then
  build=$default_build
  [ -f "$build/CTestTestfile.cmake" ] || { echo "gpu_gates: DRY_RUN needs a configured $build (or BUILD_DIR)"; exit 1; }
else
  build=$default_build
  stamp "configure + build $BUILD_TYPE in $build ($jobs jobs)"
  cmake -S . -B "$build" -G Ninja "${cmake_type[@]}" -DFUSEX_GPU_GATES=ON > "$log/build.log" 2>&1 || { tail -40 "$log/build.log"; exit 1; }
  if ! cmake --build "$build" -j "$jobs" -- -k 0 >> "$log/build.log" 2>&1; then
    echo "build: FAILED (see build.log)" | tee -a "$summary"; grep -E "FAILED|error" "$log/build.log" | head -20; status=1
  fi
  stamp "build done"
fi
# What the build is, from its cache: the build type and whether NDEBUG is defined (the arena's
# thorough checks, FUSEX_MEMORY_DEBUG, follow it).
if [ -f "$build/CMakeCache.txt" ]; then
  cache_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
  flags=$(grep -E "^CMAKE_(CUDA|CXX)_FLAGS(_${cache_type^^})?:" "$build/CMakeCache.txt" | cut -d= -f2- | tr '\n' ' ')
  ndebug="NDEBUG not defined"; [[ $flags == *-DNDEBUG* ]] && ndebug="NDEBUG defined"
  echo "build type: ${cache_type:-none} ($ndebug; CUDA/C++ flags: ${flags% })" >> "$summary"
else
  echo "build type: unknown (no CMakeCache.txt in $build)" >> "$summary"
fi

# Every test of the build (a test whose program was not built included) as one line: name, RUN_SERIAL (0/1), labels, then a shell command that
# sets the test's CTest ENVIRONMENT, enters its WORKING_DIRECTORY (if any) and runs its command.
list_tests() {
  (cd "$build" && ctest -N --show-only=json-v1) | python3 -c '
import json, shlex, sys
for t in json.load(sys.stdin)["tests"]:
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    if props.get("DISABLED"):
        continue
    env = props.get("ENVIRONMENT", [])
    env = [env] if isinstance(env, str) else env
    labels = props.get("LABELS", [])
    labels = [labels] if isinstance(labels, str) else labels
    if "command" in t:
        cmd = " ".join(shlex.quote(c) for c in t["command"])
    else:  # CTest found no executable: a test that was not built fails, it is not left out
        cmd = "echo " + shlex.quote("gpu_gates: " + t["name"] + ": no executable (not built)") + " >&2; exit 127 #"
    if env:
        cmd = "env " + " ".join(shlex.quote(e) for e in env) + " " + cmd
    if props.get("WORKING_DIRECTORY"):
        cmd = "cd " + shlex.quote(props["WORKING_DIRECTORY"]) + " && " + cmd
    print("\t".join([t["name"], "1" if props.get("RUN_SERIAL") else "0", ",".join(labels), cmd]))'
}
mapfile -t all_tests < <(list_tests)
[ ${#all_tests[@]} -gt 0 ] || { echo "gpu_gates: ctest lists no tests in $build" | tee -a "$summary"; exit 1; }
gpu_tests=(); stress_tests=(); large_tests=()
for t in "${all_tests[@]}"; do
  IFS=$'\t' read -r name _ labels _ <<< "$t"
  [ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]] && continue
  # A test left out is not a test that passed: it fails the run (exit 1), named in the summary.
  if [ -n "$SKIP" ] && [[ $name =~ $SKIP ]]; then fail "$name: not run (SKIP=$SKIP)"; continue; fi
  case ",$labels," in
    *,gpu,*) gpu_tests+=("$t") ;;
    *,stress,*) stress_tests+=("$t") ;;
    *,large,*) large_tests+=("$t") ;;
  esac
done
stamp "${#gpu_tests[@]} GPU tests x tools: $TOOLS; stress ${#stress_tests[@]}, large ${#large_tests[@]}"
[ ${#gpu_tests[@]} -gt 0 ] || fail "no GPU tests found (label gpu) in $build"

# Tests that fill the device or measure its free memory (RUN_SERIAL, or named here) run alone.
serial_re='^(test_arena_gpu|test_arena_stress_gpu)(\.graph)?$'
run_one() {  # run_one tool name command
  local tool=$1 name=$2 cmd=$3
  mkdir -p "$log/$tool"
  local extra=()
  # The error tests provoke CUDA API errors on purpose (out of memory, capture misuse) and assert
  # the exception fusex throws for each; every other API error also surfaces as an exception (every
  # call is checked), so memcheck reports memory errors only.
  [ "$tool" = memcheck ] && extra=(--leak-check no --report-api-errors no)
  # racecheck serialises every kernel and tracks every shared-memory access: the two longest
  # programs run fewer repetitions of the same code paths under it (later flags win in the tour).
  if [ "$tool" = racecheck ]; then
    case $name in
      example.fusex-tour) cmd+=" --steps 2 --warmup 1 --blocks 10 --layers 20" ;;
      test_arena_stress_gpu*) cmd="export FUSEX_ARENA_STRESS_ITERATIONS=400; $cmd" ;;
    esac
  fi
  if [ -n "$DRY_RUN" ]; then printf '%-10s %-32s %s\n' "$tool" "$name" "$cmd"; return; fi
  timeout -k 10 "$SAN_TIMEOUT" compute-sanitizer --tool "$tool" --target-processes all "${extra[@]}" \
    --error-exitcode 99 --print-limit 50 --log-file "$log/$tool/$name.san.log" \
    bash -c "$cmd" > "$log/$tool/$name.log" 2>&1
  echo $? > "$log/$tool/$name.rc"
}
export -f run_one; export log SAN_TIMEOUT DRY_RUN

# Serial tests first, one at a time; then every other (tool, test) pair in one pool of PARALLEL,
# racecheck's first (the longest runs start early).
ordered_tools=$(for tool in $TOOLS; do [ "$tool" = racecheck ] && echo "$tool"; done; for tool in $TOOLS; do [ "$tool" != racecheck ] && echo "$tool"; done)
: > "$log/pool.list"
for tool in $ordered_tools; do
  for t in "${gpu_tests[@]}"; do
    IFS=$'\t' read -r name serial _ cmd <<< "$t"
    if [ "$serial" = 1 ] || [[ $name =~ $serial_re ]]; then run_one "$tool" "$name" "$cmd"
    else printf '%s\t%s\t%s\n' "$tool" "$name" "$cmd" >> "$log/pool.list"; fi
  done
done
stamp "serial tests done"; pack
while IFS=$'\t' read -r tool name cmd; do
  printf '%s\0%s\0%s\0' "$tool" "$name" "$cmd"
done < "$log/pool.list" | xargs -0 -n 3 -P "$PARALLEL" bash -c 'run_one "$0" "$1" "$2"'
stamp "sanitizers done"; pack

# Why a program ended: its exit status, and for a skip the line where it says why.
why_skipped() { grep -m1 -iE "skip" "$1" 2>/dev/null | cut -c1-200; }

if [ -z "$DRY_RUN" ]; then
  {
    echo
    echo "| tool | runs | clean | with reports (errors) | failed/timed out | skipped (= failed) |"
    echo "| --- | --- | --- | --- | --- | --- |"
  } >> "$summary"
  for tool in $TOOLS; do
    clean=0; dirty=0; errs=0; bad=0; skipped=0; n=0
    for t in "${gpu_tests[@]}"; do
      name=${t%%$'\t'*}; n=$((n + 1))
      rcf="$log/$tool/$name.rc"
      if [ ! -e "$rcf" ]; then bad=$((bad + 1)); fail "$tool $name: did not run"; continue; fi
      rc=$(cat "$rcf")
      e=$(grep -hoE "ERROR SUMMARY: [0-9]+" "$log/$tool/$name.san.log" 2>/dev/null | awk '{s+=$3} END {print s+0}')
      if [ "$rc" = 77 ]; then
        skipped=$((skipped + 1)); fail "$tool $name: SKIPPED (exit 77), which fails the gate: $(why_skipped "$log/$tool/$name.log")"
      elif [ "$e" -gt 0 ] || [ "$rc" = 99 ]; then
        dirty=$((dirty + 1)); errs=$((errs + e)); fail "$tool $name: $e error(s) reported (see $tool/$name.san.log)"
      elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        bad=$((bad + 1)); fail "$tool $name: timed out after ${SAN_TIMEOUT}s (SAN_TIMEOUT)"
      elif [ "$rc" = 127 ]; then
        bad=$((bad + 1)); fail "$tool $name: not run: no executable (not built?), see $tool/$name.log"
      elif [ "$rc" != 0 ]; then
        bad=$((bad + 1)); fail "$tool $name: exit status $rc (see $tool/$name.log)"
      else clean=$((clean + 1)); fi
    done
    echo "| $tool | $n | $clean | $dirty ($errs) | $bad | $skipped |" >> "$summary"
  done
fi

# The stress and large tests, run as CTest would (environment included); exit 77 fails here too.
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
# dump_hang NAME PID: every thread's stack of each process under PID (cuda-gdb: the GPU machine has
# no gdb) and the machine's state, into $log/NAME.hang.txt.
dump_hang() {
  local out="$log/$1.hang.txt" p
  stamp "$1: still running after 540 s: stacks and machine state into $1.hang.txt"
  {
    date
    for p in $(descendants "$2"); do
      echo "== process $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null)"
      case $(cat "/proc/$p/comm" 2> /dev/null) in bash | timeout | env) continue ;; esac
      grep -E '^(State|Threads|VmRSS)' "/proc/$p/status" 2> /dev/null
      timeout 60 cuda-gdb -p "$p" -batch -ex "info threads" -ex "thread apply all bt 30" 2>&1 | tail -n 400
    done
    echo "== nvidia-smi"; nvidia-smi 2>&1 | head -30
    echo "== free -m"; free -m
    echo "== top"; top -bn1 | head -20
    echo "== dmesg"; dmesg 2>&1 | tail -n 30
  } > "$out" 2>&1
}
run_gate() {  # run_gate label test-line
  local label=$1 name cmd rc
  IFS=$'\t' read -r name _ _ cmd <<< "$2"
  if [ -n "$DRY_RUN" ]; then printf '%-10s %-32s %s\n' "$label" "$name" "$cmd"; return; fi
  stamp "$label: $name"
  (export FUSEX_STRESS_SECONDS=$STRESS_SECONDS; exec timeout -k 10 600 bash -c "$cmd") > "$log/$name.log" 2>&1 &
  local pid=$! waited=0
  # A run still going after 540 s (the stress test runs STRESS_SECONDS) is hung: record where
  # before the timeout kills it.
  while kill -0 "$pid" 2> /dev/null; do
    sleep 5
    waited=$((waited + 5))
    [ $waited -eq 540 ] && dump_hang "$name" "$pid"
  done
  wait "$pid"
  rc=$?
  case $rc in
    0) echo "$label $name: passed; $(grep -hoE 'stress: .*|All tests passed.*' "$log/$name.log" | tail -1)" >> "$summary" ;;
    77) echo "$label $name: SKIPPED (fails the gate): $(why_skipped "$log/$name.log")" >> "$summary"
        fail "$label $name: SKIPPED (exit 77), which fails the gate: $(why_skipped "$log/$name.log")" ;;
    *) echo "$label $name: FAILED, exit status $rc (see $name.log)" >> "$summary"
       fail "$label $name: exit status $rc (see $name.log)" ;;
  esac
}
if [ -z "${NO_STRESS:-}" ]; then
  [ -z "$ONLY$SKIP" ] && [ ${#stress_tests[@]} -eq 0 ] && fail "no stress test registered (configure with -DFUSEX_GPU_GATES=ON)"
  [ -z "$ONLY$SKIP" ] && [ ${#large_tests[@]} -eq 0 ] && fail "no large test registered (configure with -DFUSEX_GPU_GATES=ON)"
  for t in "${stress_tests[@]}"; do run_gate stress "$t"; done
  for t in "${large_tests[@]}"; do run_gate large "$t"; done
fi

[ -n "$DRY_RUN" ] && { echo "gpu_gates: dry run, nothing executed"; exit 0; }
if [ -e "$summary.details" ]; then { echo; echo "Failures:"; cat "$summary.details"; } >> "$summary"; fi
echo >> "$summary"
if [ $status = 0 ]; then echo "RESULT: every gate ran and is clean" >> "$summary"; else echo "RESULT: FAILED" >> "$summary"; fi
stamp "done, status $status"
cat "$summary"
exit $status
