#!/usr/bin/env bash
# GPT training benchmark (issue 7's configuration: vocab 512, d_model 256, 4 layers, 4 heads,
# seq 128, batch 8, fp32, AdamW), llmlab against PyTorch in one run:
#   1. the machine's FMA peak (AVX-512 and AVX2 loops) at 1 and 2 threads
#   2. llmlab tokens/s and peak RSS at 1 and 2 threads (best of 2 runs)
#   3. PyTorch (Debian's python3-torch) with its best thread settings: every combination of
#      torch threads, OPENBLAS_NUM_THREADS and the pthread/OpenMP OpenBLAS, all with the
#      AVX-512 kernels (OPENBLAS_CORETYPE=SkylakeX: OpenBLAS misdetects this CPU otherwise)
#   4. parity: from identical initial weights and batches (.npy), the losses of 10 steps
# Targets: >= 1.0x PyTorch at 1 thread, >= 1.3x at 2 threads, >= 70% of the FMA peak,
# peak RSS no higher than PyTorch's, losses equal to rel. 1e-4.
#   scripts/bench/gpt_train.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$root/build"
py=/usr/bin/python3
peer="$root/scripts/bench/peers/gpt_train_torch.py"
steps=${STEPS:-15}
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
best() { sort -g | tail -1; }

echo "== FMA peak (GFLOP/s) =="
for t in 1 2; do
  echo "threads=$t avx512=$("$bin/scripts/bench/fma_peak" $t) avx2=$("$bin/scripts/bench/fma_peak_avx2" $t)"
done | tee "$tmp/peak"

echo "== llmlab =="
for t in 1 2; do
  for r in 1 2; do "$bin/llmlab" "$root/scripts/bench/gpt_step.lua" $t $steps; done | tee "$tmp/lab$t"
done

echo "== PyTorch =="
export OPENBLAS_CORETYPE=SkylakeX
for variant in pthread openmp; do
  for t in 1 2; do
    for ob in 1 2; do
      line=$(LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-$variant OPENBLAS_NUM_THREADS=$ob \
             $py "$peer" speed $t $steps)
      echo "$line blas=$variant" | tee -a "$tmp/torch_all"
      # cores in use: the larger of the two pools
      cores=$(( t > ob ? t : ob ))
      echo "$line" >> "$tmp/torch_cores$cores"
    done
  done
done

echo "== summary =="
pk1=$(awk '/threads=1/' "$tmp/peak" | field avx512); pk2=$(awk '/threads=2/' "$tmp/peak" | field avx512)
av1=$(awk '/threads=1/' "$tmp/peak" | field avx2); av2=$(awk '/threads=2/' "$tmp/peak" | field avx2)
flop=$(field mflop_per_token < "$tmp/lab1" | head -1)
for t in 1 2; do
  l=$(field tokens_per_s < "$tmp/lab$t" | best)
  lr=$(field peak_rss_mib < "$tmp/lab$t" | best)
  tt=$(field tokens_per_s < "$tmp/torch_cores$t" | best)
  tr=$(field peak_rss_mib < "$tmp/torch_cores$t" | sort -g | head -1)
  pk=$([ $t = 1 ] && echo $pk1 || echo $pk2); av=$([ $t = 1 ] && echo $av1 || echo $av2)
  awk -v t=$t -v l=$l -v tt=$tt -v f=$flop -v pk=$pk -v av=$av -v lr=$lr -v tr=$tr 'BEGIN {
    g = l * f / 1000
    printf "%d thread(s): llmlab %.0f tok/s, PyTorch best %.0f tok/s, ratio %.2f; llmlab %.1f GFLOP/s = %.0f%% of the AVX-512 FMA peak (%.0f), %.0f%% of the AVX2 peak (%.0f); peak RSS llmlab %s MiB, PyTorch %s MiB\n",
      t, l, tt, l / tt, g, 100 * g / pk, pk, 100 * g / av, av, lr, tr }'
done

echo "== parity (10 steps from identical weights and batches) =="
mine=$("$bin/llmlab" "$root/scripts/bench/gpt_parity.lua" "$tmp" 10)
theirs=$($py "$peer" parity "$tmp" 10)
echo "llmlab:  $mine"
echo "PyTorch: $theirs"
paste <(echo "$mine" | tr ' ' '\n') <(echo "$theirs" | tr ' ' '\n') | awk '
  { d = ($1 - $2) / $2; if (d < 0) d = -d; if (d > worst) worst = d }
  END { printf "largest relative difference %.2e (target <= 1e-4): %s\n", worst, worst <= 1e-4 ? "ok" : "FAILED" }'
