#!/usr/bin/env bash
# One H200 session's GPU evidence, started in the background (setsid) so that it outlives a call:
#   build/rel  Release (NDEBUG)        GPU test programs + stress/large (FUSEX_GPU_GATES=ON)
#   build/dbg  Release flags without -DNDEBUG (the arena's thorough checks on)
#   build/mut  a copy of the tree with three deliberate bugs (softmax * 0, layer_norm with the sample
#              variance, isinf always true): test_reduce_gpu and test_elementwise_gpu only
# then, as each build ends, ctest -L gpu (both launch paths) in it. Logs: /tmp/suite/*.log.
# Usage: tools/maintainer/device_suite.sh start | wait SECONDS
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
L=/tmp/suite
if [ "${1:-}" = start ]; then
  mkdir -p $L /tmp/prefix
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/prefix; done
  export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:$PATH
  rm -rf /tmp/mut && mkdir -p /tmp/mut && tar --exclude=./build --exclude=./.debs --exclude=./.git -cf - . | tar -xf - -C /tmp/mut
  ( cd /tmp/mut
    sed -i 's/return exp(x - logsumexp(x, axis, keepdim));/return exp(x - logsumexp(x, axis, keepdim)) * 0;/' include/fusex/expr/reduce.hpp
    sed -i 's/var(x, -1, 0.0, keepdim)/var(x, -1, 1.0, keepdim)/' include/fusex/expr/reduce.hpp
    sed -i '/struct isinf : predicate_op/,/^};/ s/if constexpr (std::is_floating_point_v<C>) return a == .*;/if constexpr (std::is_floating_point_v<C>) return true;/' include/fusex/expr/ops.hpp
    diff -r $root/include include > $L/mutations.txt )
  one() {  # one NAME SRC CMAKE_ARGS... : configure, build the GPU tests, run them
    local n=$1 src=$2; shift 2
    cmake -S "$src" -B /tmp/b/$n -G Ninja -DFUSEX_GPU_GATES=ON -DFUSEX_BUILD_EXAMPLES=OFF "$@" > $L/$n.build.log 2>&1
    local t
    if [ $n = mut ]; then t="test_reduce_gpu test_elementwise_gpu"; else
      t=$(ninja -C /tmp/b/$n -t targets all | grep -oE '^test_[a-z0-9_]*gpu:' | tr -d : | sort -u | tr '\n' ' '); fi
    echo "targets: $t" >> $L/$n.build.log
    ninja -C /tmp/b/$n -j 16 -k 0 $t >> $L/$n.build.log 2>&1; echo "build exit $?" >> $L/$n.build.log
    date +%s > $L/$n.built
    local only=(); [ $n = mut ] && only=(-R '^test_(reduce|elementwise)_gpu')
    (cd /tmp/b/$n && ctest -L gpu "${only[@]}" -j 4 --timeout 300 --output-on-failure > $L/$n.ctest.log 2>&1; echo "ctest exit $?" >> $L/$n.ctest.log)
    date +%s > $L/$n.done
  }
  date +%s > $L/start
  export -f one; export L
  setsid bash -c "one rel $root -DCMAKE_BUILD_TYPE=Release" > /dev/null 2>&1 < /dev/null &
  setsid bash -c "one dbg $root -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS_RELEASE=-O3 -DCMAKE_CXX_FLAGS_RELEASE=-O3" > /dev/null 2>&1 < /dev/null &
  setsid bash -c "one mut /tmp/mut -DCMAKE_BUILD_TYPE=Release" > /dev/null 2>&1 < /dev/null &
  sleep 5; echo started
fi
if [ "${1:-}" = wait ]; then
  end=$(( $(date +%s) + ${2:-500} ))
  while [ $(date +%s) -lt $end ]; do
    [ -e $L/rel.done ] && [ -e $L/dbg.done ] && [ -e $L/mut.done ] && break
    sleep 10
  done
  for n in rel dbg mut; do echo "== $n: built $( [ -e $L/$n.built ] && echo yes || echo no), done $( [ -e $L/$n.done ] && echo yes || echo no)"
    grep -E "build exit|FAILED:" $L/$n.build.log | head -5; tail -n 25 $L/$n.ctest.log 2>/dev/null | grep -E "tests passed|Failed|\*\*\*|Not Run|exit" ; done
  mkdir -p "$OUT" && tar -czf "$OUT/suite.tar.gz" -C $L . 2>/dev/null; true
fi
