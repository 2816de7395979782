#!/usr/bin/env bash
# cmake/find_nccl.cmake finds NCCL as the NVIDIA wheel ships it: site-packages/nvidia/nccl/ with
# include/nccl.h and lib/libnccl.so.2, no libnccl.so link. Configures a tiny project (no
# compiler, about a second) that includes the same file the build uses, against a temporary
# wheel-shaped site-packages, once with the wheel named as LLMLAB_PYTHON_SITE and once found
# through a python3 whose sys.path holds it.
#   tests/cmake/test_find_nccl.sh SOURCE_DIR
set -u
SRC="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fails=0
check() { if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

site="$TMP/venv/lib/python3.12/site-packages"
mkdir -p "$site/nvidia/nccl/include" "$site/nvidia/nccl/lib" "$TMP/proj"
printf '#define NCCL_MAJOR 2\n' > "$site/nvidia/nccl/include/nccl.h"
: > "$site/nvidia/nccl/lib/libnccl.so.2"
cat > "$TMP/proj/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(probe LANGUAGES NONE)
include($SRC/cmake/find_nccl.cmake)
message(STATUS "NCCL_INCLUDE_DIR=\${NCCL_INCLUDE_DIR}")
message(STATUS "NCCL_LIBRARY=\${NCCL_LIBRARY}")
message(STATUS "FROM=\${LLMLAB_NCCL_FROM}")
CMAKE

out="$(cmake -S "$TMP/proj" -B "$TMP/b1" -DLLMLAB_PYTHON_SITE="$site" 2>&1)"
echo "$out" | grep -qF "NCCL_LIBRARY=$site/nvidia/nccl/lib/libnccl.so.2" &&
  echo "$out" | grep -qF "NCCL_INCLUDE_DIR=$site/nvidia/nccl/include" && echo "$out" | grep -qF "FROM=a Python wheel"
check "the wheel's libnccl.so.2 and nccl.h are found (LLMLAB_PYTHON_SITE)" $?
[ $? -eq 0 ] || echo "$out"

# a python3 that reports the wheel's site-packages on its sys.path (as a venv's would)
mkdir -p "$TMP/bin"
cat > "$TMP/bin/python3" <<PY
#!/bin/sh
exec $(command -v python3) -c "import sys; sys.path.insert(0, '$site'); exec(sys.argv[1])" "\$2"
PY
chmod +x "$TMP/bin/python3"
out="$(PATH="$TMP/bin:$PATH" cmake -S "$TMP/proj" -B "$TMP/b2" 2>&1)"
echo "$out" | grep -qF "NCCL_LIBRARY=$site/nvidia/nccl/lib/libnccl.so.2"
check "the wheel is found through python3's sys.path" $?
[ $? -eq 0 ] || echo "$out"

echo "$fails failures"
[ $fails -eq 0 ]
