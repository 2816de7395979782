#!/usr/bin/env bash
# The llmlab command line: options, script arguments, exit codes, and errors that would
# otherwise hang a job (one rank fails while the others wait in a collective).
set -u
LLMLAB="$1"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fails=0
check() { # name, condition result
  if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}

"$LLMLAB" --version | grep -q "^llmlab [0-9]"; check "--version" $?
"$LLMLAB" --help | grep -q -- "-n N"; check "--help lists -n" $?
"$LLMLAB" --bogus >/dev/null 2>&1; [ $? -eq 2 ]; check "unknown option exits 2" $?

out="$("$LLMLAB" -e 'print(lab.dist.world(), 6 * 7)')"
[ "$out" = "$(printf '1\t42')" ]; check "-e without mpirun is a world of 1" $?

cat > "$TMP/args.lua" <<'LUA'
print(#arg, arg[0]:match("args.lua$") ~= nil, arg[1], arg[2])
LUA
out="$("$LLMLAB" "$TMP/args.lua" alpha "two words")"
[ "$out" = "$(printf '2\ttrue\talpha\ttwo words')" ]; check "script arguments reach arg" $?

out="$("$LLMLAB" -n 2 -e 'io.write(lab.dist.rank(), "/", lab.dist.world(), "\n")' | sort | tr '\n' ' ')"
[ "$out" = "[0] 0/2 [1] 1/2 " ]; check "-n 2 runs two ranks (-e output labelled by rank)" $?

"$LLMLAB" -n 3 -e 'x = 1' >/dev/null 2>&1; check "success exits 0" $?

# a preset's name without its key: the planner says which key, with the nearest preset
err="$("$LLMLAB" --plan llama3-70 gpus=8 2>&1)"
echo "$err" | grep -qF "got llama3-70; did you mean model=llama3-70b?"; check "--plan llama3-70 suggests model=llama3-70b" $?
err="$("$LLMLAB" --plan model=llama3-70b h100 2>&1)"
echo "$err" | grep -qF "got h100; did you mean gpu=h100?"; check "--plan h100 suggests gpu=h100" $?

# lab.print_on (and lab.printr, the same function) shows tables as the REPL does, in scripts too
out="$("$LLMLAB" -e 'lab.printr(0, {b = 2, a = {1, 2}}, "s"); lab.print_on(1, "not rank 1"); print(lab.printr == lab.print_on)')"
[ "$out" = "$(printf '{a = {1, 2}, b = 2}\ts\ntrue')" ]; check "lab.printr pretty-prints and is lab.print_on" $?

err="$("$LLMLAB" -n 2 -e 'error("bad on every rank")' 2>&1 >/dev/null)"
rc=$?
[ $rc -ne 0 ] && echo "$err" | grep -q "rank 0: .*bad on every rank" && echo "$err" | grep -q "rank 1: .*bad on every rank"
check "errors on all ranks are each printed with the rank, exit non-zero" $?

# a send nobody receives: reported and dropped when the script ends (MPI_Finalize discarded it
# silently); the script itself succeeded
err="$(timeout 60 "$LLMLAB" -n 2 -e 'if lab.dist.rank() == 0 then lab.dist.send(lab.ones(4), 1) end' 2>&1 >/dev/null)"
rc=$?
[ $rc -eq 0 ] && echo "$err" | grep -qF "rank 1: dropped a message from rank 0 (f32[4], tag 0) that no recv took"
check "a send never received is reported at the end of the script" $?

# rank 1 fails while rank 0 waits in all_reduce: rank 0 gives up at once (fail fast: the board
# shows rank 1 finished), rank 1's error first, the wait reported once
start=$(date +%s)
err="$(LLMLAB_ERROR_TIMEOUT=20 timeout 60 "$LLMLAB" -n 2 -e 'if lab.dist.rank() == 1 then error("planted failure") end lab.dist.all_reduce(lab.ones(4))' 2>&1)"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$err" | grep -q "rank 1: .*planted failure" \
  && echo "$err" | grep -qF "[0] all_reduce: rank 1 stopped with an error (shown first) before it joined this collective on world; gave up at once" \
  && [ $elapsed -lt 15 ]
check "a failed rank with others in a collective ends their wait at once ($elapsed s)" $?

# rank 1 fails while rank 0 still runs (it never reaches anything): aborted after the timeout, not hung
start=$(date +%s)
err="$(LLMLAB_ERROR_TIMEOUT=2 timeout 60 "$LLMLAB" -n 2 -e 'if lab.dist.rank() == 1 then error("planted failure") end while true do end' 2>&1)"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$err" | grep -q "rank 1: .*planted failure" \
  && echo "$err" | grep -q "did not finish within 2 s" && [ $elapsed -lt 30 ]
check "a failed rank with another still running aborts after the timeout ($elapsed s)" $?

# rank 1 waits in an all_reduce rank 0 never calls while rank 0 still runs: with LLMLAB_WATCHDOG
# set, a plain script reports it with what every rank is doing instead of hanging (a rank that
# has finished instead ends the wait at once, as above); the error carries the user's line
start=$(date +%s)
err="$(LLMLAB_WATCHDOG=1 timeout 60 "$LLMLAB" -n 2 -e 'if lab.dist.rank() == 1 then lab.dist.all_reduce(lab.ones(4)) else local t = lab.clock() while lab.clock() - t < 4 do end end' 2>&1)"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$err" | grep -q "rank 1: (command line):1: all_reduce: watchdog: no progress for 1 s on world" \
  && echo "$err" | grep -q "rank 1: in all_reduce(4 x f32)" && echo "$err" | grep -q "rank 0: running Lua" && [ $elapsed -lt 30 ]
check "LLMLAB_WATCHDOG reports a rank the others left in a collective ($elapsed s)" $?

printf 'x = 21\n=x * 2\n' | "$LLMLAB" -n 2 > "$TMP/piped.txt"
grep -q "^\[0-1\] 42$" "$TMP/piped.txt"; check "REPL reads piped input without a terminal" $?

root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$("$LLMLAB" "$root/scripts/train_gpt.lua" task=copy steps=4 d_model=16 n_layer=1 batch=4 log_every=1 metrics="$TMP/m.jsonl")"
[ "$(grep -c '^{.*"loss": [0-9.]*.*"step": [0-9]*.*}$' "$TMP/m.jsonl")" = 4 ] && echo "$out" | grep -q "accuracy on 256 fresh examples"
check "train_gpt.lua writes one JSON line per step and reports accuracy" $?

# OpenMP's idle threads sleep instead of spinning when the cores are shared: more threads than
# cores here (LLMLAB_THREADS), or other work; a wait policy the user set is kept
more=$(( $(nproc) + 1 ))
out="$(LLMLAB_THREADS=$more "$LLMLAB" -e 'print(os.getenv("OMP_WAIT_POLICY"))')"
[ "$out" = "PASSIVE" ]; check "more threads than cores: OMP_WAIT_POLICY=PASSIVE" $?
out="$(OMP_WAIT_POLICY=active LLMLAB_THREADS=$more "$LLMLAB" -e 'print(os.getenv("OMP_WAIT_POLICY"), os.getenv("GOMP_SPINCOUNT"))')"
[ "$out" = "$(printf 'active\tnil')" ]; check "the user's OMP_WAIT_POLICY is kept" $?
out="$(LLMLAB_THREADS=$more "$LLMLAB" -n 2 -e 'io.write(os.getenv("OMP_WAIT_POLICY"), "\n")' | sort -u)"
[ "$out" = "[0-1] PASSIVE" ]; check "every rank of -n 2 sleeps when its threads exceed the cores" $?

# CUDA is a plugin opened on first use (runtime/cuda/loader.h): llmlab starts with no CUDA library
# mapped, on every rank; --version opens it then, after start, and says whether CUDA is usable
cuda_re='libcudart|libcublas|libnccl|libllmlab_cuda|libllmlab_nccl'
out="$("$LLMLAB" -n 2 -e 'io.write(io.open("/proc/self/maps"):read("a"))')"
echo "$out" | grep -q "liblua" && ! echo "$out" | grep -Eq "$cuda_re"
check "no CUDA library is mapped at start (/proc/self/maps of both ranks of -n 2)" $?
if command -v readelf >/dev/null; then
  ! readelf -d "$LLMLAB" | grep NEEDED | grep -Eq "$cuda_re"; check "llmlab has no CUDA library among its NEEDED" $?
fi
ver="$("$LLMLAB" --version)"
echo "$ver" | grep -Eq "^(CUDA compiled in|CUDA not compiled in|.*plugin|libcudart)"; check "--version says whether CUDA is usable" $?
if echo "$ver" | grep -q "^CUDA compiled in"; then
  # the plugin and cudart are loaded by --version, and only after the program took control
  dbg="$(LD_DEBUG=libs "$LLMLAB" --version 2>&1 >/dev/null)"
  echo "$dbg" | awk '/transferring control/ {t = 1} /calling init: .*(libcudart|libllmlab_cuda)/ {if (!t) bad = 1; seen = 1}
                     END {exit !(seen && !bad)}'
  check "LD_DEBUG=libs: --version loads cudart and the plugin after start, not before" $?
  out="$("$LLMLAB" -e 'lab.cuda.status() io.write(io.open("/proc/self/maps"):read("a"))')"
  echo "$out" | grep -q "libllmlab_cuda.so" && echo "$out" | grep -q "libcudart"
  check "lab.cuda.status() opens the plugin (the maps check above can see it)" $?
  out="$(LLMLAB_PLUGIN_DIR="$TMP/none" "$LLMLAB" --version)"
  echo "$out" | grep -q "the plugin libllmlab_cuda.so is missing (looked for $TMP/none/libllmlab_cuda.so)"
  check "--version names a missing plugin" $?
  err="$(LLMLAB_PLUGIN_DIR="$TMP/none" "$LLMLAB" -e 'lab.zeros(2, {device = "cuda"})' 2>&1)"
  echo "$err" | grep -q "device 'cuda': CUDA is not usable: the plugin libllmlab_cuda.so is missing"
  check "a cuda tensor without the plugin is a Lua error saying why" $?
  # the CUDA libraries laid out as the NVIDIA wheels lay them out (CUDA 13's nvidia/cu13/lib, NCCL's
  # nvidia/nccl/lib, versioned names only) on PYTHONPATH are the ones loaded, found by the
  # plugin loader with no other hint; LLMLAB_CUDA_LIBS (the override) wins over them
  libdir() { echo "$ver" | awk -v l="$1" '$1 == l && $3 == "from" {print $4}' | xargs dirname; }
  site="$TMP/site"
  mkdir -p "$site/nvidia/cu13/lib" "$site/nvidia/nccl/lib" "$TMP/over"
  ln -s "$(libdir cudart)/libcudart.so.13" "$site/nvidia/cu13/lib/libcudart.so.13"
  ln -s "$(libdir cublasLt)/libcublasLt.so.13" "$site/nvidia/cu13/lib/libcublasLt.so.13"
  nccl_dir="$(echo "$ver" | awk '$1 == "nccl" {print $5}' | xargs dirname)"
  ln -s "$nccl_dir/libnccl.so.2" "$site/nvidia/nccl/lib/libnccl.so.2"
  ln -s "$nccl_dir/libnccl.so.2" "$TMP/over/libnccl.so.2"
  out="$(env -u CUDA_HOME -u CUDA_PATH -u LLMLAB_CUDA_LIBS -u VIRTUAL_ENV -u CONDA_PREFIX PATH=/nonexistent HOME="$TMP" \
         PYTHONPATH="$site" "$LLMLAB" --version)"
  echo "$out" | grep -q "cudart   13\.[0-9]* from $site/nvidia/cu13/lib/libcudart.so.13" &&
    echo "$out" | grep -q "cublasLt .* from $site/nvidia/cu13/lib/libcublasLt.so.13" &&
    { ! echo "$ver" | grep -q "^  nccl     NCCL" || echo "$out" | grep -q "nccl     NCCL .* from $site/nvidia/nccl/lib/libnccl.so.2"; }
  check "the loader takes cudart, cuBLASLt and NCCL from a wheel-shaped site-packages on PYTHONPATH" $?
  [ $? -eq 0 ] || echo "$out"
  out="$(env -u CUDA_HOME -u CUDA_PATH PATH=/nonexistent HOME="$TMP" PYTHONPATH="$site" LLMLAB_CUDA_LIBS="$TMP/over" \
         "$LLMLAB" --version)"
  ! echo "$ver" | grep -q "^  nccl     NCCL" || echo "$out" | grep -q "nccl     NCCL .* from $TMP/over/libnccl.so.2"
  check "LLMLAB_CUDA_LIBS comes before the wheels" $?
fi

echo "$fails failures"
[ $fails -eq 0 ]
