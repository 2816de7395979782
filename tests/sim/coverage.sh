#!/usr/bin/env bash
# The sim lane's coverage line: every kernel instantiation of kernels/cuda that the CUDA device
# can launch, with the launches the lane's processes made of it under the SIMT interpreter
# (each process appends its table to the file named by LLMLAB_SIMT_COVERAGE at exit). Fails
# when a kernel was never launched or the file is missing.
#   tests/sim/coverage.sh build/simt_coverage.txt
set -euo pipefail
file="${1:?usage: coverage.sh FILE}"
if [ ! -s "$file" ]; then
  echo "sim coverage: $file is missing or empty (run the sim lane first: ctest -L sim)" >&2
  exit 1
fi
# "simt coverage: NAME -> N launches, B blocks, S s": sum N per NAME over every process
sed -n 's/^simt coverage: \(.*\) -> \([0-9]*\) launches.*/\2\t\1/p' "$file" |
  awk -F'\t' '{ n[$2] += $1 } END { for (k in n) printf "%d\t%s\n", n[k], k }' | sort -t$'\t' -k2 >"$file.sum"
zero=0
line="sim coverage (kernel -> launches):"
while IFS=$'\t' read -r n name; do
  line="$line $name -> $n;"
  [ "$n" -gt 0 ] || zero=$((zero + 1))
done <"$file.sum"
echo "$line"
if [ "$zero" -gt 0 ]; then
  echo "sim coverage: $zero kernel(s) never launched in the sim lane:" >&2
  awk -F'\t' '$1 == 0 { print "  " $2 }' "$file.sum" >&2
  exit 1
fi
