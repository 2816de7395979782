#!/usr/bin/env bash
# Data parallelism on this machine, side by side in one run: the benchmark GPT on 1 rank
# (all cores) and on 2 ranks with DDP (overlap on and off) and ZeRO stages 1-3, per-rank
# batch 8 (so 2 ranks process twice the tokens per step). Each mode runs twice, alternating;
# the faster run is kept.
#   scripts/bench/data_parallel.sh [steps]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
steps=${1:-8}
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
for round in 1 2; do
  "$root/build/llmlab" "$root/scripts/bench/data_parallel.lua" single "$steps" >>"$tmp"
  for mode in ddp ddp_nooverlap zero1 zero2 zero3; do
    "$root/build/llmlab" -n 2 "$root/scripts/bench/data_parallel.lua" "$mode" "$steps" >>"$tmp"
  done
done
echo "best of 2 runs per mode (global tokens/s; peaks are the largest rank's):"
sort -k1,1 -t' ' "$tmp" | awk '
  { split($3, a, "="); mode = $1; tps = a[2] + 0
    if (!(mode in best) || tps > best[mode]) { best[mode] = tps; line[mode] = $0 } }
  END { n = split("single ddp ddp_nooverlap zero1 zero2 zero3", order, " ")
        for (i = 1; i <= n; i++) if (order[i] in line) print line[order[i]]
        if ("single" in best && "ddp" in best)
          printf "DDP 1 -> 2 ranks: %.2fx tokens/s; overlap on/off: %.2fx\n", best["ddp"] / best["single"],
                 best["ddp"] / best["ddp_nooverlap"] }'
