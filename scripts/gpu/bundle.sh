#!/usr/bin/env bash
# Builds llmlab here (Release, CUDA on, portable x86-64-v3 code) and writes a relocatable bundle
# for a GPU machine that has no package registry: .gpu/llmlab-gpu.tar.gz (git-ignored), which
# unpacks to llmlab-gpu/ holding the binary and its CUDA and NCCL plugins, the Lua library, the
# tests and benchmarks scripts/gpu/device_check.sh runs, and the ldd closure of every shared
# library they need that is neither glibc nor CUDA: Lua 5.4, readline, OpenBLAS (with gfortran,
# quadmath, gomp), zlib, OpenMPI with its mpirun and plugins (relocated with OPAL_PREFIX and
# friends, set by llmlab-gpu/env.sh), PMIx and its plugins, hwloc, libevent. CUDA, cuBLASLt and
# NCCL are not in it: the plugins find them on the GPU machine (runtime/cuda/loader.h).
# The GCC runtime (libstdc++, libgcc_s) goes to lib/gcc/, used only where the machine lacks it.
# OpenMPI plugins that need a network stack absent from a single node (UCX, libfabric, PSM,
# verbs) are left out: the bundle runs one node, over shared memory and TCP.
#   scripts/gpu/bundle.sh                    build build-bundle/ and pack it (about 6 min on 2 cores)
#   scripts/gpu/bundle.sh --from-build DIR   pack an existing build (what CI's test does: seconds)
#   scripts/gpu/bundle.sh --dir-only ...     leave .gpu/llmlab-gpu/ unpacked, no tarball
# Prints the bundle's size and the oldest glibc it needs (the newest GLIBC_ symbol version any
# of its files references), also written to llmlab-gpu/MANIFEST.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="" DIR_ONLY=0 OUTDIR="$ROOT/.gpu"
while [ $# -gt 0 ]; do
  case "$1" in
  --from-build) BUILD="$(cd "$2" && pwd)"; shift 2 ;;
  --dir-only) DIR_ONLY=1; shift ;;
  --out) OUTDIR="$2"; shift 2 ;;
  *) echo "bundle.sh: unknown argument '$1' (--from-build DIR, --dir-only, --out DIR)" >&2; exit 2 ;;
  esac
done
LIMIT_MIB=48
START=$SECONDS

if [ -z "$BUILD" ]; then
  BUILD="$ROOT/build-bundle"
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLLMLAB_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
    -DLLMLAB_ARCH=x86-64-v3 -DBUILD_TESTING=OFF >/dev/null
  cmake --build "$BUILD" -j "${JOBS:-2}" --target llmlab gpu_gemm_cublaslt
  echo "bundle: built in $((SECONDS - START)) s"
fi
[ -x "$BUILD/llmlab" ] || { echo "bundle: no llmlab in $BUILD" >&2; exit 1; }

B="$OUTDIR/llmlab-gpu"
rm -rf "$B"
mkdir -p "$B"/{bin,lib/gcc,lib/hwloc,ompi/bin,ompi/lib,ompi/etc,ompi/share,pmix/lib,scripts,tests}

# ---- what runs: the binary, its plugins, the cuBLASLt peer benchmark ----
cp "$BUILD/llmlab" "$B/bin/"
for f in libllmlab_cuda.so libllmlab_nccl.so gpu_gemm_cublaslt; do
  [ -e "$BUILD/$f" ] && cp "$BUILD/$f" "$B/bin/"
done

# ---- OpenMPI: mpirun (orterun), its plugins, help texts and settings; PMIx with its plugins ----
MPIRUN_REAL="$(readlink -f "$(command -v mpirun)")"
cp "$MPIRUN_REAL" "$B/ompi/bin/mpirun"
[ -x "$(dirname "$MPIRUN_REAL")/orted" ] && cp "$(dirname "$MPIRUN_REAL")/orted" "$B/ompi/bin/"
OMPI_PKGLIB="$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')"
OMPI_PKGDATA="$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')"
OMPI_SYSCONF="$(ompi_info --path sysconfdir --parsable 2>/dev/null | sed -n 's/^path:sysconfdir://p')"
cp -r "$OMPI_PKGDATA" "$B/ompi/share/openmpi"
cp "$OMPI_SYSCONF"/openmpi-mca-params.conf "$B/ompi/etc/" 2>/dev/null || : >"$B/ompi/etc/openmpi-mca-params.conf"
PMIX_LIB="$(readlink -f "$(ldconfig -p | awk '/libpmix.so.2 /{print $NF; exit}')")"
PMIX_PREFIX="$(dirname "$(dirname "$PMIX_LIB")")"
[ -d "$PMIX_PREFIX/lib/pmix" ] && cp -r "$PMIX_PREFIX/lib/pmix" "$B/pmix/lib/"
[ -d "$PMIX_PREFIX/share" ] && cp -r "$PMIX_PREFIX/share" "$B/pmix/"
# a plugin that needs a library outside what a single node needs is left out
network='libfabric|libucp|libucs|libuct|libucm|libpsm|libibverbs|librdmacm|libinfinipath|libcuda\.so|libnvidia|libOpenCL|libX|libxml2'
mkdir -p "$B/ompi/lib/openmpi"
kept=0 dropped=0
# (ldd's output is kept before grep reads it: with pipefail, grep -q leaving early would let
# ldd's SIGPIPE turn a match into "no match")
needs_network() { local deps; deps="$(ldd "$1" 2>&1)"; grep -Eq "$network|not found" <<<"$deps"; }
for so in "$OMPI_PKGLIB"/mca_*.so; do
  if needs_network "$so"; then dropped=$((dropped + 1)); continue; fi
  cp "$so" "$B/ompi/lib/openmpi/"; kept=$((kept + 1))
done
for so in "$B"/pmix/lib/pmix/*.so; do
  if needs_network "$so"; then rm -f "$so"; fi
done
echo "bundle: OpenMPI plugins: $kept kept, $dropped left out (they need a network stack or a missing library)"

# ---- the ldd closure of everything above, minus glibc and CUDA ----
glibc='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv|libanl|libmvec|libnsl|libBrokenLocale|libcrypt)\.so'
cuda='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia|libnvrtc|libnvJitLink)\.so'
gccrt='^(libstdc\+\+|libgcc_s)\.so'
declare -A seen=()
elfs=("$B"/bin/* "$B"/ompi/bin/* "$B"/ompi/lib/openmpi/*.so)
[ -d "$B/pmix/lib/pmix" ] && elfs+=("$B"/pmix/lib/pmix/*.so)
missing=""
for f in "${elfs[@]}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      [[ "$name" =~ $cuda ]] || missing="$missing $name(${f##*/})"
      continue
    fi
    [[ "$name" =~ $glibc|$cuda ]] && continue
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    if [[ "$name" =~ $gccrt ]]; then cp -L "$path" "$B/lib/gcc/$name"; else cp -L "$path" "$B/lib/$name"; fi
  done < <(LD_LIBRARY_PATH="$BUILD" ldd "$f" 2>/dev/null)
done
[ -z "$missing" ] || { echo "bundle: libraries not found:$missing" >&2; exit 1; }

# ---- the Lua library, the tests and benchmarks the check runs ----
cp -r "$ROOT/lua" "$B/lua"
rm -f "$B"/lua/*.c "$B"/lua/*.h
mkdir -p "$B/tests" "$B/scripts/bench" "$B/scripts/labs" "$B/scripts/gpu"
cp -r "$ROOT/tests/gpu" "$B/tests/gpu"
mkdir -p "$B/tests/lua"
cp "$ROOT"/tests/lua/*.lua "$B/tests/lua/"
cp "$ROOT"/scripts/bench/gpu_*.lua "$ROOT"/scripts/bench/gpu_*_torch.py "$ROOT"/scripts/bench/collectives.lua "$B/scripts/bench/"
cp "$ROOT"/scripts/labs/11_*.lua "$B/scripts/labs/" 2>/dev/null || true
cp "$ROOT"/scripts/gpu/device_check.sh "$ROOT"/scripts/gpu/gpt20.lua "$ROOT"/scripts/gpu/env.sh "$B/scripts/gpu/"
ln -s scripts/gpu/device_check.sh "$B/device_check.sh"
ln -s scripts/gpu/env.sh "$B/env.sh"

# ---- the oldest glibc it needs, and a manifest ----
glibc_need="$({ find "$B" -type f \( -name '*.so*' -o -perm -u+x \) -exec objdump -T {} + 2>/dev/null || true; } |
  grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -1)"
{
  echo "llmlab GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME") from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "oldest glibc needed: ${glibc_need#GLIBC_} (built against $(ldd --version | head -1 | grep -o '[0-9.]*$'))"
  echo "cuda plugin: $([ -e "$B/bin/libllmlab_cuda.so" ] && echo yes || echo 'no (built without CUDA)'); nccl plugin: $([ -e "$B/bin/libllmlab_nccl.so" ] && echo yes || echo no)"
  echo "OpenMPI $(ompi_info --version 2>/dev/null | head -1 | grep -o 'v[0-9.]*'): $kept plugins"
  echo "files:"
  (cd "$B" && find . -type f | sort | xargs ls -l | awk '{printf "  %10d %s\n", $5, $9}')
} >"$B/MANIFEST"

unpacked=$(du -sm "$B" | cut -f1)
if [ $DIR_ONLY -eq 1 ]; then
  echo "bundle: $B ($unpacked MiB unpacked), glibc >= ${glibc_need#GLIBC_}, $((SECONDS - START)) s"
  exit 0
fi
tar -C "$OUTDIR" -czf "$OUTDIR/llmlab-gpu.tar.gz" llmlab-gpu
rm -rf "$B"
packed=$(( $(stat -c %s "$OUTDIR/llmlab-gpu.tar.gz") / 1048576 ))
echo "bundle: $OUTDIR/llmlab-gpu.tar.gz: $packed MiB packed ($unpacked MiB unpacked), glibc >= ${glibc_need#GLIBC_}, $((SECONDS - START)) s"
if [ "$packed" -gt $LIMIT_MIB ]; then
  echo "bundle: over the $LIMIT_MIB MiB that may travel" >&2
  exit 1
fi
