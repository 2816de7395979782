#!/usr/bin/env bash
# Before/after of a change, as issue 31 asks of a refactor: the same four measurements taken
# with two builds in alternating runs (A B, then B A, ...), so a machine whose speed drifts
# (other work on shared cores) slows both alike, and the median of the per-pair ratios new/old.
#   scripts/bench/paired.sh OLD_LLMLAB NEW_LLMLAB [ROUNDS=7]
# What each run measures (single-threaded where it can be, CPU seconds where the work is one
# process, so load on the other core moves it least):
#   gemm       CPU ms of one 512x512 f32 matmul (os.clock over 30 products, 1 thread)
#   gpt_step   CPU ms of a GPT training step (scripts/bench/gpt_step.lua 1 10 tiny)
#   all_reduce wall us of a 4 KiB all_reduce at 2 ranks (slowest rank, 2000 calls)
#   repl       median ms of `=1` through a pty at 2 ranks (build/scripts/bench/repl_latency)
# Prints one line per measurement: old median, new median, median of new/old over the pairs.
set -euo pipefail
old="$1" new="$2" rounds="${3:-7}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
latency="$root/build/scripts/bench/repl_latency"
mpirun_args=(-np 2 --oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpirun_args+=(--allow-run-as-root)

gemm='lab.set_threads(1); local a, b = lab.randn(512, 512), lab.randn(512, 512); a:matmul(b)
local c0 = os.clock(); for _ = 1, 30 do a:matmul(b) end; print((os.clock() - c0) / 30 * 1e3)'
allreduce='local x = lab.zeros(1024); for _ = 1, 50 do lab.dist.all_reduce(x) end; lab.dist.barrier()
local t0 = lab.clock(); for _ = 1, 2000 do lab.dist.all_reduce(x) end
local t = lab.tensor({ (lab.clock() - t0) / 2000 * 1e6 }, { dtype = "f64" }); lab.dist.all_reduce(t, "max")
lab.print0(t[1])'

measure() { # measure WHAT BIN -> one number
  case "$1" in
  gemm) "$2" -e "$gemm" ;;
  gpt_step) "$2" "$root/scripts/bench/gpt_step.lua" 1 10 tiny | sed -n 's/.*cpu_ms_per_step=\([0-9.]*\).*/\1/p' ;;
  all_reduce) mpirun "${mpirun_args[@]}" "$2" -e "$allreduce" | awk '{print $NF}' ;; # "[0] x" under -e on ranks
  repl) "$latency" "$2" 2 100 | awk '{print $1}' ;;
  esac
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
whats="gemm gpt_step all_reduce repl"
for r in $(seq 1 "$rounds"); do
  for w in $whats; do
    if [ $((r % 2)) -eq 1 ]; then a=$(measure "$w" "$old"); b=$(measure "$w" "$new")
    else b=$(measure "$w" "$new"); a=$(measure "$w" "$old"); fi
    echo "$a $b" >>"$tmp/$w"
  done
done
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf '%-11s %12s %12s %10s  (%s rounds, alternating)\n' measurement old new new/old "$rounds"
for w in $whats; do
  o=$(awk '{print $1}' "$tmp/$w" | median) n=$(awk '{print $2}' "$tmp/$w" | median)
  ratio=$(awk '{print $2 / $1}' "$tmp/$w" | median)
  printf '%-11s %12.4g %12.4g %10.3f\n' "$w" "$o" "$n" "$ratio"
done
