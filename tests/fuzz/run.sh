#!/usr/bin/env bash
# Runs tests/fuzz/fuzz.lua for ctest in a fresh temporary directory (the fuzzer's relative
# file names land there), and when the run dies (a crash, a sanitizer report, the ctest
# timeout) prints the call each rank was making, which fuzz.lua writes before every call.
#   run.sh LLMLAB RANKS calls=N seed=S
set -u
llmlab="$1" ranks="$2"
shift 2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
show_last_calls() {
  for f in "$work"/fuzz_last_call.*; do
    [ -f "$f" ] && { echo "--- the call in progress:"; cat "$f"; }
  done
}
trap 'show_last_calls; rm -rf "$work"; exit 1' TERM INT
cd "$work"
"$llmlab" -n "$ranks" "$here/fuzz.lua" "$@" &
pid=$!
wait $pid
rc=$?
[ $rc -ne 0 ] && show_last_calls
rm -rf "$work"
exit $rc
