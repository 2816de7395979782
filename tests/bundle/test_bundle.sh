#!/usr/bin/env bash
# The GPU bundle needs nothing from the machine it was built on: packs this build with
# scripts/gpu/bundle.sh --from-build (the packaging the GPU machine gets, without the separate
# CUDA Release build, which costs minutes), unpacks it, and inside a mount namespace where the
# system's OpenMPI (libraries, plugins, mpirun), Lua, OpenBLAS, readline, hwloc, PMIx and
# libevent are hidden (bind mounts of an empty file or directory over them) runs
# device_check.sh --dry-run: steps at 1 and 2 ranks, every one from the bundle. The CUDA
# libraries (cudart, cuBLASLt, NCCL) are hidden too: the bundle's llmlab must run without any,
# saying why CUDA is not usable. Shows first that the hiding works: the build's own llmlab and
# the system's mpirun cannot start there.
# Exits 77 (skipped) where unshare -m is refused (no CAP_SYS_ADMIN in a container).
#   tests/bundle/test_bundle.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$(cd "$1" && pwd)" SRC="$(cd "$2" && pwd)"
if ! unshare -m true 2>/dev/null; then
  echo "skipped: unshare -m is refused here (needs CAP_SYS_ADMIN), so the system's libraries cannot be hidden"
  exit 77
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fails=0
check() { if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

start=$SECONDS
"$SRC/scripts/gpu/bundle.sh" --from-build "$BUILD" --out "$TMP/pack" >"$TMP/bundle.log" 2>&1
check "bundle.sh packs the build under 48 MiB ($(tail -1 "$TMP/bundle.log"))" $?
mkdir -p "$TMP/x" && tar -C "$TMP/x" -xzf "$TMP/pack/llmlab-gpu.tar.gz"
check "the tarball unpacks" $?
grep -q "^oldest glibc needed: 2\.[0-9]*" "$TMP/x/llmlab-gpu/MANIFEST"; check "the manifest says the oldest glibc needed" $?
files="$(tar -tzf "$TMP/pack/llmlab-gpu.tar.gz")"
! grep -Eq "/lib(cudart|cublas|cublasLt|nccl|cuda)\.so|/lib(ucp|uct|ucs|ucm|fabric|psm|ibverbs|rdmacm)" <<<"$files"
check "no CUDA library and no network stack (UCX, libfabric, PSM, verbs) in the bundle" $?

# what the namespace hides: each library's real file (a link's target), the OpenMPI and PMIx
# plugin directories, OpenBLAS's directories and mpirun
hide_files=""
for lib in liblua5.4.so.0 libreadline.so.8 libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 libopenblas.so.0 \
           libhwloc.so.15 libpmix.so.2 libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7 libgfortran.so.5; do
  for p in $(/sbin/ldconfig -p | awk -v l="$lib" '$1 == l {print $NF}'); do hide_files="$hide_files $(readlink -f "$p")"; done
done
for p in "$(command -v mpirun)" "$(command -v orted)"; do [ -n "$p" ] && hide_files="$hide_files $(readlink -f "$p")"; done
hide_dirs=""
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/openblas-openmp \
         /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/share/openmpi /etc/openmpi; do
  [ -d "$d" ] && hide_dirs="$hide_dirs $d"
done
# the CUDA libraries: their directories, or the files alone where they sit beside libc
for lib in libcudart.so.13 libcublasLt.so.13 libnccl.so.2; do
  for p in $(/sbin/ldconfig -p | awk -v l="$lib" '$1 == l {print $NF}') /usr/local/cuda/lib64/$lib; do
    [ -e "$p" ] || continue
    real="$(readlink -f "$p")"
    if [ -e "$(dirname "$real")/libc.so.6" ]; then hide_files="$hide_files $real"
    else case " $hide_dirs " in *" $(dirname "$real") "*) ;; *) hide_dirs="$hide_dirs $(dirname "$real")" ;; esac; fi
  done
done
: >"$TMP/empty"
mkdir -p "$TMP/emptydir"
cat >"$TMP/inner.sh" <<INNER
set -u
for f in $hide_files; do mount --bind "$TMP/empty" "\$f" || exit 3; done
for d in $hide_dirs; do mount --bind "$TMP/emptydir" "\$d" || exit 3; done
echo "hidden: \$(echo $hide_files $hide_dirs | wc -w) files and directories"
if "$BUILD/llmlab" -e '' >/dev/null 2>&1; then echo "HIDING FAILED: the build's llmlab still starts"; exit 4; fi
if mpirun --version >/dev/null 2>&1; then echo "HIDING FAILED: the system's mpirun still runs"; exit 4; fi
echo "the build's llmlab and the system's mpirun cannot start here"
env -u CUDA_HOME -u CUDA_PATH -u LLMLAB_CUDA_LIBS "$TMP/x/llmlab-gpu/device_check.sh" --dry-run "$TMP/report"
INNER
out="$(unshare -m bash "$TMP/inner.sh" 2>&1)"
rc=$?
echo "$out"
[ $rc -ne 3 ] && [ $rc -ne 4 ]; check "the system's OpenMPI, Lua, OpenBLAS, readline, hwloc, PMIx, libevent are hidden" $?
[ $rc -eq 0 ]; check "device_check.sh --dry-run passes from the bundle with them hidden" $?
echo "$out" | grep -q "== mpi .* ok" && echo "$out" | grep -q "== dist_np1_np2 .* ok \[sim\]"
check "the dry run's 2-rank steps ran (bundled mpirun)" $?
grep -q "| attention_speed | essential | 60 | 0 | would run (needs a GPU) |" "$TMP/report/report.md" &&
  grep -q "| gpt_20_steps | essential | 40 | [0-9]* | ok \[sim\] |" "$TMP/report/report.md" &&
  [ -s "$TMP/report/report.json" ] && [ -s "$TMP/report/logs.tar.gz" ]
check "report.md lists the GPU steps with their budgets; report.json and the logs are written" $?
tar -xzOf "$TMP/report/logs.tar.gz" logs/01_env.log | grep -Eq "^(CUDA not compiled in|libcudart.so.13 not found)"
check "with no CUDA library the bundle's llmlab runs and --version says why CUDA is not usable" $?
tar -xzOf "$TMP/report/logs.tar.gz" logs/02_mpi.log | grep -q "mpi from $TMP/x/llmlab-gpu/lib/libmpi.so.40"
check "the ranks loaded the bundle's libmpi" $?
echo "bundle + dry run: $((SECONDS - start)) s"
echo "$fails failures"
[ $fails -eq 0 ]
