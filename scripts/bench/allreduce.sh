#!/usr/bin/env bash
# all_reduce through lab.dist vs plain MPI_Allreduce, side by side in one run, at each
# world size given (default 2 4). Each side runs three times, alternating; the best time per size
# is kept. Bandwidths follow nccl-tests: algbw = bytes/time, busbw = algbw * 2(n-1)/n.
#   scripts/bench/allreduce.sh [ranks...]
# Target: lab/C >= 0.95 at sizes >= 1 MiB.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for n in "${@:-2 4}"; do
  for round in 1 2 3; do
    mpirun -np "$n" "${flags[@]}" "$root/build/scripts/bench/allreduce_mpi" >"$tmp/c$round"
    mpirun -np "$n" "${flags[@]}" "$root/build/llmlab" "$root/scripts/bench/allreduce.lua" >"$tmp/lab$round"
  done
  echo "all_reduce sum f32, $n ranks (best of 3 alternating runs each)"
  paste "$tmp/lab1" "$tmp/lab2" "$tmp/lab3" "$tmp/c1" "$tmp/c2" "$tmp/c3" | awk -v n="$n" '
    BEGIN { printf "%10s %10s %10s %11s %11s %8s\n", "bytes", "lab us", "C us", "algbw GB/s", "busbw GB/s", "lab/C"; worst = 1e9 }
    { l = $2; if ($4 < l) l = $4; if ($6 < l) l = $6; c = $8; if ($10 < c) c = $10; if ($12 < c) c = $12; alg = $1 / l / 1e9; r = c / l
      if ($1 >= 1048576 && r < worst) worst = r
      printf "%10d %10.1f %10.1f %11.3f %11.3f %8.3f\n", $1, l * 1e6, c * 1e6, alg, alg * 2 * (n - 1) / n, r }
    END { printf "worst lab/C speed ratio at >= 1 MiB: %.3f (target >= 0.95)\n\n", worst }'
done
