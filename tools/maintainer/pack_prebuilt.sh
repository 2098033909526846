#!/usr/bin/env bash
# Packs a build folder's executables and CTest files into DEST/build.tar.xz for tools/maintainer/device_final.sh
# (the device tool carries at most 64 MiB). Usage: tools/maintainer/pack_prebuilt.sh BUILD_DIR DEST_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
mkdir -p "$2" && dest=$(cd "$2" && pwd)
echo "$build" > "$dest/build_dir"
(cd "$build" && find . \( -name CTestTestfile.cmake -o -name DartConfiguration.tcl \
   -o \( -type f -perm -u+x ! -name '*.o' ! -name '*.so' ! -path './CMakeFiles/*' \) \) -print0 |
   tar --null -T - -cf - | xz -T2 -6 > "$dest/build.tar.xz")
ls -la "$dest/build.tar.xz"
