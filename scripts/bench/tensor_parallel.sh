#!/usr/bin/env bash
# Tensor vs data parallelism for the benchmark GPT on this machine, side by side: one rank
# (TP=1), two ranks with TP=2, two ranks with DDP (DP=2); same global batch. Each runs twice,
# alternating; the faster run is kept.
#   scripts/bench/tensor_parallel.sh [steps]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
steps=${1:-8}
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
for round in 1 2; do
  "$root/build/llmlab" "$root/scripts/bench/tensor_parallel.lua" tp1 "$steps" >>"$tmp"
  "$root/build/llmlab" -n 2 "$root/scripts/bench/tensor_parallel.lua" tp2 "$steps" >>"$tmp"
  "$root/build/llmlab" -n 2 "$root/scripts/bench/tensor_parallel.lua" dp2 "$steps" >>"$tmp"
done
echo "best of 2 runs per layout (global batch 8 x 128 tokens):"
awk '{ split($3, a, "="); ms = a[2] + 0
       if (!($1 in best) || ms < best[$1]) { best[$1] = ms; line[$1] = $0 } }
     END { print line["tp1"]; print line["tp2"]; print line["dp2"]
           printf "TP=2 vs DP=2 step time: %.2fx; TP=2 vs one rank: %.2fx\n", best["tp2"] / best["dp2"], best["tp2"] / best["tp1"] }' "$tmp"
