#!/usr/bin/env bash
# The GPU check, run from an unpacked bundle (scripts/gpu/bundle.sh) with no build and no package
# install, on a GPU machine lent for minutes (one H200: 10 minutes a command, 15 in all):
#   tar xzf llmlab-gpu.tar.gz && llmlab-gpu/device_check.sh OUTDIR
#   llmlab-gpu/device_check.sh --dry-run OUTDIR     (any machine: the steps that need no GPU)
# Steps run from most to least important, each under its own time budget: an essential tier of
# at most 5 minutes (environment, bundled MPI, the kernel tests, FlashAttention correctness and
# speed, GEMM, 20 GPT steps against the cpu), then the rest, up to 8 minutes in all (the Lua
# suite's on_gpu cases, collectives on GPU tensors, torch's SDPA, GPT-2 124M against torch,
# NCCL and MPI staging, compute-sanitizer). A step whose budget no longer fits is skipped and
# the report says so; a cut-short run still has the essentials. Writes OUTDIR/report.md,
# OUTDIR/report.json and OUTDIR/logs.tar.gz (every step's full output). Exits 0 when every step
# that ran passed, 1 when one failed or timed out, 3 for a run (not --dry-run) that found no GPU.
# --dry-run runs every step that needs no GPU from the bundle (the environment, mpirun at 2
# ranks, the GPU tests' own logic and the 20-step GPT on the sim device at 1 and 2 ranks) and
# lists the GPU steps it would run with their budgets.
set -uo pipefail
DRY=0
OUT=""
for a in "$@"; do
  case "$a" in
  --dry-run) DRY=1 ;;
  -h | --help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
  *) OUT="$a" ;;
  esac
done
[ -n "$OUT" ] || { echo "device_check.sh: give the directory for the report: device_check.sh [--dry-run] OUTDIR" >&2; exit 2; }
mkdir -p "$OUT/logs" || exit 2
OUT="$(cd "$OUT" && pwd)"
B="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
if [ ! -x "$B/bin/llmlab" ]; then
  echo "device_check.sh: run it from an unpacked bundle (scripts/gpu/bundle.sh makes one); $B has no bin/llmlab" >&2
  exit 2
fi
. "$B/scripts/gpu/env.sh" || exit 2
cd "$B" || exit 2
TOTAL=480     # seconds for every step together
ESSENTIAL=300 # the essential tier's share
START=$SECONDS

# ---- the steps: name|tier|budget s|needs GPU|command [|command on the sim device in a dry run] ----
GPU_LUA_TESTS="collectives ddp_zero tp pp amp amp_fp8 autograd_dist"
on_gpu() { # ranks: the Lua suite's on_gpu cases
  local rc=0 t launch="llmlab"
  [ "$1" -gt 1 ] && launch="llmlab -n $1"
  for t in $GPU_LUA_TESTS; do
    (cd tests/lua && LLMLAB_ERROR_TIMEOUT=5 $launch ../gpu/on_gpu.lua test_$t.lua) || rc=1
  done
  return $rc
}
env_step() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  kernel: $(uname -r)  $(ldd --version 2>&1 | head -1)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
  echo "--- bundle"; head -4 "$B/MANIFEST"
  echo "--- nvidia-smi"
  timeout 15 nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1 || echo "(no nvidia-smi)"
  echo "--- llmlab --version (the CUDA libraries it loaded, their versions and where from)"
  llmlab --version || return 1
  echo "--- mpirun"; mpirun --version 2>&1 | head -1
  echo "--- python3 / torch"
  timeout 40 python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "")' 2>&1 | tail -1
  echo "--- compute-sanitizer"
  (command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer) 2>/dev/null || echo "(none)"
  return 0
}
mpi_step() {
  llmlab -n 2 -e 'local f = io.open("/proc/self/maps"):read("a")
    io.write(string.format("rank %d of %d: lua %s, mpi from %s\n", lab.dist.rank(), lab.dist.world(), _VERSION,
      f:match("(%S*libmpi%.so[%.%d]*)") or "?"))'
}
gpt_step() { # 20 f32 steps against the cpu, then tests/gpu's GPT test (f32 and bf16 mixed precision)
  llmlab scripts/gpu/gpt20.lua device="$1" || return 1
  (cd tests/gpu && LLMLAB_GPU_TEST_DEVICE="$1" llmlab test_gpt.lua)
}
gemm_step() {
  llmlab scripts/bench/gpu_gemm.lua 4096 8192 || return 1
  # the C peer links cudart and cuBLASLt itself: give it the directories llmlab's loader chose
  local cudadirs
  cudadirs="$(llmlab --version | awk '/^  (cudart|cublasLt) .* from \//{print $NF}' | xargs -r -n1 dirname | sort -u | paste -sd:)"
  [ -x bin/gpu_gemm_cublaslt ] && LD_LIBRARY_PATH="$cudadirs:$LD_LIBRARY_PATH" timeout 30 bin/gpu_gemm_cublaslt 4096 8192
  timeout 40 python3 scripts/bench/gpu_gemm_torch.py 4096 8192 || echo "(torch peer failed)"
}
gpt2_step() {
  llmlab scripts/bench/gpu_gpt2.lua batch=8 steps=6 || return 1
  python3 scripts/bench/gpu_gpt2_torch.py 8 6 || echo "(torch peer failed)"
}
coll_step() { # NCCL at a world of 1, MPI staging at 2 ranks sharing the GPU
  llmlab scripts/bench/collectives.lua op=all_reduce b=8 e=256M f=4 d=bf16 device="$1" || return 1
  llmlab -n 2 scripts/bench/collectives.lua op=all_reduce b=8 e=32M f=8 d=bf16 device="$1"
}
dist_step() {
  (cd tests/gpu && llmlab test_dist.lua && llmlab -n 2 test_dist.lua)
}
sanitizer_step() {
  local san
  san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  [ -x "$san" ] || { echo "compute-sanitizer not found: skipped"; return 0; }
  (cd tests/gpu && "$san" --tool memcheck --error-exitcode 9 llmlab test_kernels.lua | tail -5) || return 1
  (cd tests/gpu && "$san" --tool racecheck --error-exitcode 9 llmlab test_flash_attention.lua | tail -5)
}

STEPS=(
  "env|essential|20|0|env_step"
  "mpi|essential|15|0|mpi_step"
  "kernels|essential|55|1|(cd tests/gpu && llmlab test_kernels.lua)|(cd tests/gpu && LLMLAB_GPU_TEST_DEVICE=sim llmlab test_kernels.lua)"
  "flash_attention|essential|45|1|(cd tests/gpu && llmlab test_flash_attention.lua)|(cd tests/gpu && LLMLAB_GPU_TEST_DEVICE=sim llmlab test_flash_attention.lua)"
  "attention_speed|essential|60|1|llmlab scripts/bench/gpu_attention.lua 1024 4096"
  "gemm_bf16|essential|40|1|gemm_step"
  "gpt_20_steps|essential|40|1|gpt_step cuda|gpt_step sim"
  "lua_on_gpu_np1|rest|35|1|on_gpu 1"
  "lua_on_gpu_np2|rest|25|1|on_gpu 2|(cd tests/lua && LLMLAB_GPU_TEST_DEVICE=sim LLMLAB_ERROR_TIMEOUT=5 llmlab -n 2 ../gpu/on_gpu.lua test_collectives.lua)"
  "dist_np1_np2|rest|15|1|dist_step|(cd tests/gpu && LLMLAB_GPU_TEST_DEVICE=sim llmlab -n 2 test_dist.lua)"
  "attention_torch|rest|30|1|python3 scripts/bench/gpu_attention_torch.py 1024 4096"
  "gpt2_124m|rest|50|1|gpt2_step"
  "collectives|rest|20|1|coll_step cuda|llmlab -n 2 scripts/bench/collectives.lua op=all_reduce b=64 e=64K f=16 d=bf16 device=sim"
  "sanitizer|rest|30|1|sanitizer_step"
)

# ---- run ----
# A dry run checks the bundle (its MPI, Lua, OpenBLAS, the tests' logic), not the kernels: the sim
# device runs its cpu kernels there (LLMLAB_SIMT=0), since under the SIMT interpreter the GPT
# steps alone take minutes; ctest's sim lane interprets kernels/cuda.
[ $DRY -eq 1 ] && export LLMLAB_SIMT=0
GPU_OK=0 NO_GPU=""
if [ $DRY -eq 0 ]; then
  llmlab -e 'os.exit(lab.cuda.is_available() and 0 or 3)' >/dev/null 2>&1 && GPU_OK=1
  [ $GPU_OK -eq 1 ] || NO_GPU="no usable GPU: $(llmlab -e 'print(lab.cuda.status())' 2>&1 | head -1)"
  [ -z "$NO_GPU" ] || echo "device_check: $NO_GPU"
fi
RESULTS="$OUT/steps.tsv"
: >"$RESULTS"
i=0
for s in "${STEPS[@]}"; do
  IFS='|' read -r name tier budget gpu cmd dry_cmd <<<"$s"
  i=$((i + 1))
  log="$OUT/logs/$(printf '%02d' $i)_$name.log"
  used=$((SECONDS - START))
  status="" took=0 run="$cmd"
  if [ $DRY -eq 1 ] && [ "$gpu" = 1 ]; then
    if [ -n "${dry_cmd:-}" ]; then run="$dry_cmd"; else status="would run (needs a GPU)"; fi
  elif [ $DRY -eq 0 ] && [ "$gpu" = 1 ] && [ $GPU_OK -eq 0 ]; then
    status="skipped: no usable GPU"
  fi
  limit=$TOTAL
  [ "$tier" = essential ] && limit=$ESSENTIAL
  if [ -z "$status" ] && [ $((used + budget)) -gt $limit ]; then status="skipped for time ($used s used of $limit)"; fi
  if [ -z "$status" ]; then
    printf '== %-16s %-9s budget %3d s ... ' "$name" "$tier" "$budget"
    t0=$SECONDS
    # a step's shell function runs in a child bash with this file's functions; timeout ends it
    # and every rank it started
    timeout -k 5 "$budget" bash -c "$(declare -f); GPU_LUA_TESTS='$GPU_LUA_TESTS'; B='$B'; $run" >"$log" 2>&1
    rc=$?
    took=$((SECONDS - t0))
    case $rc in
    0) status="ok" ;;
    124 | 137) status="timed out at $budget s" ;;
    77) status="skipped (exit 77): $(tail -1 "$log")" ;;
    *) status="failed (exit $rc)" ;;
    esac
    [ "$run" != "$cmd" ] && status="$status [sim]"
    echo "$status ($took s)"
  else
    printf '== %-16s %-9s budget %3d s ... %s\n' "$name" "$tier" "$budget" "$status"
    : >"$log"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$name" "$tier" "$budget" "$gpu" "$took" "$status" "$log" >>"$RESULTS"
done
echo "device_check: $((SECONDS - START)) s in all"

# ---- the report: markdown and JSON (python3 writes the JSON; the markdown does not need it) ----
MODE=$([ $DRY -eq 1 ] && echo "dry run (no GPU used)" || echo "GPU run")
MACHINE="$(timeout 10 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
MACHINE="${MACHINE:-no GPU}, $(nproc) cores, $(hostname)"
{
  echo "# llmlab GPU check: $MODE"
  echo
  echo "$(date -u +%Y-%m-%d\ %H:%M) UTC on $MACHINE; $((SECONDS - START)) s of steps (budget $TOTAL s, essential tier $ESSENTIAL s)."
  echo
  [ -z "$NO_GPU" ] || { echo "**$NO_GPU**"; echo; }
  echo "| # | step | tier | budget s | took s | status |"
  echo "|---|---|---|---|---|---|"
  while IFS=$'\t' read -r n name tier budget gpu took status log; do
    echo "| $n | $name | $tier | $budget | $took | $status |"
  done <"$RESULTS"
  echo
  while IFS=$'\t' read -r n name tier budget gpu took status log; do
    [ -s "$log" ] || continue
    echo "## $n. $name ($status)"
    echo
    echo '```'
    tail -25 "$log" | cut -c1-200
    echo '```'
    echo
  done <"$RESULTS"
} >"$OUT/report.md"
python3 - "$RESULTS" "$OUT/report.json" "$MODE" "$MACHINE" <<'PY' || echo "device_check: python3 could not write report.json"
import json, sys, time
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
steps = []
for n, name, tier, budget, gpu, took, status, log in rows:
    try:
        tail = open(log, errors="replace").read().splitlines()[-25:]
    except OSError:
        tail = []
    steps.append({"n": int(n), "name": name, "tier": tier, "budget_s": int(budget), "needs_gpu": gpu == "1",
                  "took_s": int(took), "status": status, "tail": tail})
json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mode": sys.argv[3],
           "machine": sys.argv[4], "steps": steps}, open(sys.argv[2], "w"), indent=1)
PY
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs steps.tsv && rm -rf "$OUT/logs" "$OUT/steps.tsv"
echo "device_check: report in $OUT/report.md, $OUT/report.json, $OUT/logs.tar.gz"
# the exit status: 0 when no step that ran failed or timed out, 3 for a GPU run without a GPU
grep -qP '\t(failed|timed out)' <(tar -xzOf "$OUT/logs.tar.gz" steps.tsv) && exit 1
[ -z "$NO_GPU" ] || exit 3
exit 0
