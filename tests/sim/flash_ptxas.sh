#!/bin/sh
# Issue 23: no FlashAttention kernel spills or uses stack (local memory), by ptxas for sm_90.
# Compiles kernels/cuda/flash_attention.cu and flash_attention_bwd.cu as the build does, with
# --resource-usage and -Xptxas -warn-spills -warn-lmem-usage, prints each entry's registers,
# stack and spills, and fails on any stack frame, spill or ptxas warning. Needs only nvcc (no
# GPU); exits 77 (ctest: skipped) where there is none.
# Usage: flash_ptxas.sh NVCC SOURCE_ROOT [ARCH]   (FLASH_PTXAS_EXTRA: more nvcc flags)
nvcc=$1 src=$2 arch=${3:-90}
if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then
  echo "skipped: no nvcc (CMAKE_CUDA_COMPILER is '$nvcc'): ptxas figures need the CUDA toolkit"
  exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
bad=0
for f in flash_attention.cu flash_attention_bwd.cu; do
  # shellcheck disable=SC2086
  if ! "$nvcc" -O3 -DNDEBUG -arch=sm_$arch --expt-relaxed-constexpr -std=c++17 -I"$src" --resource-usage \
      -Xptxas -warn-spills -Xptxas -warn-lmem-usage $FLASH_PTXAS_EXTRA -c "$src/kernels/cuda/$f" -o "$tmp/k.o" \
      >"$tmp/out" 2>&1; then
    cat "$tmp/out"
    echo "FAIL: nvcc could not compile $f"
    exit 1
  fi
  # one line per entry: registers, stack bytes, spill bytes (stores + loads), name
  awk -v file="$f" '
    /Compiling entry function/ { name = $0; sub(/.*function \047/, "", name); sub(/\047.*/, "", name); n++ }
    /bytes stack frame/ { stack[n] = $1; spill[n] = $5 + $9 }
    /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") regs[n] = $(i + 1); names[n] = name }
    /[Ww]arning/ { warn = warn "\n  " $0 }
    END {
      if (n == 0) { print "FAIL: " file ": ptxas reported no entry"; exit 1 }
      for (i = 1; i <= n; i++) {
        printf "%s\t%s regs\t%s stack\t%s spill\t%s\n", file, regs[i], stack[i], spill[i], names[i]
        if (stack[i] != 0 || spill[i] != 0) { printf "FAIL: %s uses stack or spills\n", names[i]; bad = 1 }
      }
      if (warn != "") { print "FAIL: ptxas warnings:" warn; bad = 1 }
      exit bad
    }' "$tmp/out" >"$tmp/table" || bad=1
  if command -v c++filt >/dev/null 2>&1; then c++filt <"$tmp/table"; else cat "$tmp/table"; fi
done
if [ "$bad" != 0 ]; then
  echo "FAIL: a FlashAttention kernel spills, uses stack, or ptxas warned (above)"
  exit 1
fi
echo "ok: every FlashAttention kernel without stack or spills (sm_$arch)"
