#!/usr/bin/env bash
# Builds one parser fuzz target with clang's libFuzzer (coverage-guided, with ASan and UBSan)
# and runs it for a bounded time on a copy of its seed corpus (new inputs it finds are not
# written back into the source tree). Exit 77 (ctest: skipped) where clang or libFuzzer is
# missing: the plain-driver test fuzz.parser.<name> covers the corpus there.
#   libfuzzer.sh BUILD_DIR SOURCE_DIR PARSER SECONDS
set -u
build="$1" src="$2" parser="$3" secs="$4"
clang="$(command -v clang || command -v clang-14 || true)"
if [ -z "$clang" ]; then echo "clang not found: libFuzzer run skipped"; exit 77; fi
out="$build/fuzz_libfuzzer"
mkdir -p "$out"
malloc_mb=1024
case "$parser" in
  # npy: 16 GiB until load_npy checks the file's size before allocating what its header
  # promises (/work/wt/briefs/fuzz_findings/npy_alloc_before_size_check.md); then 1024
  npy) parsers="runtime/npy.c" malloc_mb=16384 ;;
  json) parsers="runtime/json.c" ;;
  safetensors) parsers="runtime/safetensors.c runtime/json.c" ;;
  *) echo "unknown parser $parser"; exit 2 ;;
esac
# the parser's own files are instrumented; the rest of the engine comes from this build's
# library (gcc-built, uninstrumented), with the libraries it needs
objs=()
for p in $parsers; do objs+=("$src/$p"); done
read -r -a libs <"$build/tests/fuzz_link_libs.txt"
if ! "$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$src" \
    "$src/tests/fuzz/fuzz_$parser.c" "${objs[@]}" "${libs[@]}" -o "$out/fuzz_$parser" 2>"$out/build_$parser.log"; then
  if grep -qiE "libclang_rt.fuzzer|cannot find -l|unsupported option" "$out/build_$parser.log"; then
    echo "clang has no libFuzzer runtime here (libclang-rt-dev): skipped"; cat "$out/build_$parser.log"; exit 77
  fi
  cat "$out/build_$parser.log"; exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$src/tests/fuzz/corpus/$parser/." "$work/"
# allocator_may_return_null: an absurd size must be refused by the parser, not kill the run
ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:${ASAN_OPTIONS:-}" \
  "$out/fuzz_$parser" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb="$malloc_mb" -print_final_stats=1 \
  -artifact_prefix="$out/crash_${parser}_" "$work" 2>&1 | grep -vE "^#[0-9]+\s+(NEW|REDUCE|pulse)" | tail -25
rc=${PIPESTATUS[0]}
[ $rc -ne 0 ] && echo "libFuzzer found a failing input: $out/crash_${parser}_*"
exit $rc
