#!/usr/bin/env bash
# The GPU check, for a GPU machine without a package registry (one H200, CUDA 13, PyTorch in
# python3), in under 7 minutes: unpacks .deps/*.deb (scripts/gpu/fetch_debs.sh) into a prefix
# (never over /) when llmlab's libraries are missing, points OpenMPI at it with OPAL_PREFIX,
# builds with CUDA, runs ctest -L gpu, compute-sanitizer on the small kernel tests, and the GPU
# benchmarks. Everything it prints is also written under $OUT (default ./gpu-check).
#   OUT=/tmp/out scripts/gpu/device_check.sh
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/gpu-check}"
mkdir -p "$OUT"
exec > >(tee "$OUT/device_check.log") 2>&1
START=$SECONDS
step() { echo; echo "== $1 ($((SECONDS - START)) s)"; }
cd "$ROOT"

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$NVCC" --version | tail -1

step "dependencies"
PREFIX="$ROOT/.deps/prefix"
if ! [ -e /usr/include/lua5.4/lua.h ] || ! command -v mpirun >/dev/null; then
  if ls .deps/*.deb >/dev/null 2>&1; then
    mkdir -p "$PREFIX"
    for d in .deps/*.deb; do dpkg-deb -x "$d" "$PREFIX"; done
    echo "unpacked $(ls .deps/*.deb | wc -l) packages into $PREFIX"
  else
    echo "llmlab's libraries are missing and .deps/ holds no .deb files: run scripts/gpu/fetch_debs.sh elsewhere"
    exit 1
  fi
  ARCH=$(uname -m)-linux-gnu
  export PATH="$PREFIX/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/$ARCH:$PREFIX/usr/lib/$ARCH/openblas-openmp:$PREFIX/usr/lib:${LD_LIBRARY_PATH:-}"
  export OPAL_PREFIX="$PREFIX/usr"
  export CMAKE_PREFIX_PATH="$PREFIX/usr"
  export CPATH="$PREFIX/usr/include:$PREFIX/usr/include/lua5.4:$PREFIX/usr/include/$ARCH:${CPATH:-}"
  export LIBRARY_PATH="$PREFIX/usr/lib/$ARCH:${LIBRARY_PATH:-}"
fi

step "build with CUDA"
timeout 180 cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DLLMLAB_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
  > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
timeout 240 cmake --build build-gpu -j "$(nproc)" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
build-gpu/llmlab --version | tee "$OUT/version.txt"

step "ctest -L gpu"
(cd build-gpu && timeout 150 ctest -L gpu -j 4 --output-on-failure) | tee "$OUT/ctest_gpu.txt"
(cd build-gpu && timeout 60 ctest -R "unit\.(caching_allocator|device)" --output-on-failure) | tail -3

step "compute-sanitizer on the kernel tests"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
  (cd tests/gpu && timeout 120 "$SAN" --tool memcheck --error-exitcode 9 "$ROOT/build-gpu/llmlab" test_kernels.lua) \
    > "$OUT/sanitizer.txt" 2>&1
  echo "memcheck exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer.txt") clean summaries)"
  tail -5 "$OUT/sanitizer.txt"
  (cd tests/gpu && timeout 60 "$SAN" --tool memcheck --error-exitcode 9 "$ROOT/build-gpu/llmlab" test_flash_attention.lua) \
    > "$OUT/sanitizer_flash.txt" 2>&1
  echo "memcheck (FlashAttention kernels) exit $?"
  tail -3 "$OUT/sanitizer_flash.txt"
else
  echo "compute-sanitizer not found"
fi

step "benchmarks: bf16 GEMM (lab, cuBLASLt from C, torch.matmul)"
timeout 60 build-gpu/gpu_gemm_cublaslt 4096 8192 | tee "$OUT/gemm_cublaslt.txt"
timeout 60 build-gpu/llmlab scripts/bench/gpu_gemm.lua 4096 8192 | tee "$OUT/gemm_lab.txt"
timeout 60 python3 scripts/bench/gpu_gemm_torch.py 4096 8192 | tee "$OUT/gemm_torch.txt"

step "benchmarks: attention, seq 512-16k, D 64/128 (lab flash vs lab math vs torch SDPA flash/cuDNN)"
timeout 75 build-gpu/llmlab scripts/bench/gpu_attention.lua | tee "$OUT/attention_lab.txt"
timeout 45 python3 scripts/bench/gpu_attention_torch.py | tee "$OUT/attention_torch.txt"

step "benchmarks: GPT-2 124M training tokens/s (lab vs PyTorch eager)"
timeout 120 build-gpu/llmlab scripts/bench/gpu_gpt2.lua | tee "$OUT/gpt2_lab.txt"
timeout 90 python3 scripts/bench/gpu_gpt2_torch.py | tee "$OUT/gpt2_torch.txt"

step "collectives on the GPU: NCCL at a world of 1, MPI staging at 2 ranks on one GPU (nccl-tests' table)"
for op in all_reduce all_gather reduce_scatter; do
  timeout 30 build-gpu/llmlab scripts/bench/collectives.lua op=$op b=8 e=256M f=4 d=bf16 device=cuda | tee "$OUT/coll_nccl_$op.txt"
done
timeout 45 build-gpu/llmlab -n 2 scripts/bench/collectives.lua op=all_reduce b=8 e=64M f=8 d=bf16 device=cuda \
  | tee "$OUT/coll_staged_all_reduce.txt"
timeout 45 build-gpu/llmlab -n 2 scripts/labs/11_collective_bench.lua | tail -25 | tee "$OUT/lab11.txt"

step "done in $((SECONDS - START)) s; results in $OUT"
