#!/usr/bin/env bash
# Runs every command shown in README.md's code blocks, as written, so the README cannot rot.
#   test_readme.sh BUILD_DIR SOURCE_DIR
# - Shell lines run from a copy of the checkout (build/ links to the build under test), in a
#   pseudo-terminal as when a user types them, each with a time cap; they must exit 0.
#   A trailing "# comment" is dropped. "[a] [b|c]" marks optional arguments: the command runs
#   without them, then once with each alternative.
# - A line that only starts a REPL (`... llmlab` or `... llmlab -n N`) gets `=lab.dist.world()`
#   on its input and must answer N.
# - "> code" lines are typed into a REPL (piped), on as many ranks as the "[ranks] value"
#   lines under them show; when a block shows output, the REPL's output must be exactly that,
#   otherwise it must contain no error.
# - Long runs get the shortening argument the README shows for them (SHORTEN below).
# The first code block must start with `scripts/llmlab -n 4` and `scripts/test`.
set -u
BUILD="$(cd "$1" && pwd)"
ROOT="$(cd "$2" && pwd)"
CAP=${README_CAP:-240}   # seconds per command
fails=0
ran=0
last=$SECONDS
check() { # name, status
  local took=$((SECONDS - last))
  last=$SECONDS
  if [ "$2" -eq 0 ]; then echo "ok   $1 (${took} s)"; else echo "FAIL $1 (${took} s)"; fails=$((fails + 1)); fi
  ran=$((ran + 1))
}

# Arguments appended to long runs (the README documents each: `steps=` and `sample=` under
# "Training a GPT", `scripts/test -R` at the top). A later key=value overrides an earlier one.
shorten() {
  case "$1" in
    *scripts/train_gpt.lua*sample=*) echo "$1 steps=5 sample=16" ;;
    *scripts/train_gpt.lua*) echo "$1 steps=5" ;;
    scripts/test) echo "$1 -R '^unit\\.views\$'" ;;
    # the GPU bundle: packs the build under test (the CUDA Release build takes minutes), and the
    # check runs its dry run (this machine has no GPU)
    scripts/gpu/bundle.sh) echo "$1 --from-build build" ;;
    *device_check.sh*--dry-run*) echo "$1" ;;
    *device_check.sh*) echo "$1 --dry-run" ;;
    *) echo "$1" ;;
  esac
}

# A copy of the checkout: the README's relative paths (scripts/, build/, README.md) resolve
# as in the source tree, and the files the commands write (metrics=run.jsonl) land here.
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for entry in "$ROOT"/*; do
  case "$(basename "$entry")" in build*) continue ;; esac
  cp -r "$entry" "$WORK/"
done
# build/ holds links to the build under test, all but Testing/ and DartConfiguration.tcl (which
# names the build directory ctest writes its logs in): `scripts/test` keeps its ctest logs here
# and must not overwrite those of the ctest run this test is part of
mkdir "$WORK/build"
for entry in "$BUILD"/*; do
  case "$(basename "$entry")" in Testing | DartConfiguration.tcl) ;; *) ln -s "$entry" "$WORK/build/" ;; esac
done
cd "$WORK"
export LLMLAB_ERROR_TIMEOUT=5
# As root, mpirun needs --allow-run-as-root; the README names this equivalent.
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

# Lines that use the hostfile `hosts` ("Running across machines") run on host1 of 2 simulated
# hosts (tests/multinode/hosts.sh, 2 ranks each), set up at the first such line, from a
# directory under the build (each host has its own /tmp), with this `hosts` naming them. Where
# the machine refuses namespaces they are skipped with the reason.
MN_READY=""
run_on_hosts() {
  local where="README.md:$1" cmd="$2" out rc reason
  if [ -z "$MN_READY" ]; then
    MNWORK="$BUILD/readme-hosts.$$"
    mkdir -p "$MNWORK" && ln -sfn "$BUILD" "$MNWORK/build" && ln -sfn "$ROOT/scripts" "$MNWORK/scripts"
    export MN_STATE="$MNWORK/state"
    reason="$( (source "$ROOT/tests/multinode/hosts.sh" && mn_up 1) 2>&1 >/dev/null </dev/null)"
    if [ $? -eq 77 ]; then
      MN_READY="skipped: ${reason#SKIP: }"
    else
      source "$ROOT/tests/multinode/hosts.sh"
      mn_up 2 2 </dev/null
      trap 'mn_down; rm -rf "$WORK" "$MNWORK"' EXIT
      printf 'host1 slots=2\nhost2 slots=2\n' >"$MNWORK/hosts"
      MN_READY=yes
    fi
  fi
  if [ "$MN_READY" != yes ]; then
    echo "skip $where: $cmd ($MN_READY)"
    return
  fi
  out="$(cd "$MNWORK" && timeout "$CAP" bash -c 'source "$1"; mn_on host1 env OMPI_MCA_plm_rsh_agent="$2" \
    OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 OMPI_MCA_oob_tcp_if_include=10.77.0.0/24 bash -c "$3"' _ \
    "$ROOT/tests/multinode/hosts.sh" "$ROOT/tests/multinode/rsh.sh" "$cmd" 2>&1 </dev/null)"
  rc=$?
  [ $rc -ne 0 ] && printf '%s\n' "$out" | tail -20
  check "$where: $cmd (on 2 simulated hosts)" $rc
}

# run_shell LINE_NO COMMAND
run_shell() {
  local where="README.md:$1" cmd="$2" out rc
  if [[ "$cmd" =~ (--hostfile\ hosts|orte_default_hostfile=) ]]; then
    run_on_hosts "$1" "$cmd"
    return
  fi
  if [[ "$cmd" =~ (^|[[:space:]/])llmlab(\ -n\ ([0-9]+))?$ ]]; then
    local n=1
    [[ "$cmd" =~ -np?\ ([0-9]+) ]] && n="${BASH_REMATCH[1]}"
    out="$(echo '=lab.dist.world()' | timeout "$CAP" bash -c "$cmd" 2>&1)"
    rc=$?
    echo "$out" | grep -qE "^\[0(-[0-9]+)?\] $n\$" && [ $rc -eq 0 ]
    rc=$?
    [ $rc -ne 0 ] && printf '%s\n' "$out" | tail -20
    check "$where: $cmd (a REPL on $n ranks answers =lab.dist.world())" $rc
    return
  fi
  local run
  run="$(shorten "$cmd")"
  # script(1) gives the command a terminal (the progress line updates in place there)
  out="$(timeout "$CAP" script -qec "$run" /dev/null </dev/null 2>&1)"
  rc=$?
  [ $rc -ne 0 ] && printf '%s\n' "$out" | tr '\r' '\n' | tail -20
  [ $rc -eq 124 ] && echo "(stopped after $CAP s)"
  check "$where: $run" $rc
}

# run_repl LINE_NO INPUT EXPECTED: a piped REPL on as many ranks as EXPECTED shows
run_repl() {
  local where="README.md:$1" input="$2" expected="$3" n=1 out rc r
  for r in $(printf '%s\n' "$expected" | grep -oE '^\[[0-9]+(-[0-9]+)?\]' | grep -oE '[0-9]+'); do
    [ $((r + 1)) -gt $n ] && n=$((r + 1))
  done
  out="$(printf '%s\n' "$input" | timeout "$CAP" build/llmlab -n "$n" 2>&1)"
  rc=$?
  if [ -n "$expected" ]; then
    [ $rc -eq 0 ] && [ "$out" = "$expected" ]
  else
    [ $rc -eq 0 ] && ! printf '%s\n' "$out" | grep -qE '^\[[0-9,-]+\] error:'
  fi
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "--- typed:"; printf '%s\n' "$input"
    echo "--- expected:"; printf '%s\n' "$expected"
    echo "--- got (exit $rc):"; printf '%s\n' "$out"
  fi
  check "$where: REPL transcript on $n ranks ($(printf '%s\n' "$input" | wc -l) lines)" $rc
}

# every optional-argument variant of a shell line
run_variants() {
  local no="$1" cmd="$2" base="" word opts=() alt
  for word in $cmd; do
    if [[ "$word" =~ ^\[.*\]$ ]]; then opts+=("${word:1:${#word}-2}"); else base+="${base:+ }$word"; fi
  done
  if [ ${#opts[@]} -eq 0 ]; then run_shell "$no" "$cmd"; return; fi
  # the words were split on blanks: only lines with optional groups are rebuilt this way
  run_shell "$no" "$base"
  for word in "${opts[@]}"; do
    IFS='|' read -ra alt <<<"$word"
    for a in "${alt[@]}"; do run_shell "$no" "$base $a"; done
  done
}

# ---- the first block: exactly these two commands first ----
first="$(awk '/^```/{n++; next} n==1' "$ROOT/README.md" | head -2)"
[ "$first" = "$(printf 'scripts/llmlab -n 4\nscripts/test')" ]
check "README.md opens with scripts/llmlab -n 4 and scripts/test" $?

# ---- every block, line by line ----
in_block=0 no=0 repl_in="" repl_out="" repl_at=0 blocks=0
flush_repl() {
  if [ -n "$repl_in" ]; then run_repl "$repl_at" "$repl_in" "$repl_out"; fi
  repl_in="" repl_out=""
}
while IFS= read -r line || [ -n "$line" ]; do
  no=$((no + 1))
  if [[ "$line" == '```'* ]]; then
    if [ $in_block -eq 1 ]; then flush_repl; in_block=0; else in_block=1; blocks=$((blocks + 1)); fi
    continue
  fi
  [ $in_block -eq 1 ] || continue
  if [[ "$line" =~ ^\>\>?\ (.*)$ ]]; then
    [ -z "$repl_in" ] && repl_at=$no
    repl_in+="${repl_in:+$'\n'}${BASH_REMATCH[1]}"
  elif [ -n "$repl_in" ] && [[ "$line" == '['* ]]; then
    repl_out+="${repl_out:+$'\n'}$line"
  elif [[ "$line" =~ ^[[:space:]]*$ ]]; then
    continue
  else
    flush_repl
    cmd="$(printf '%s' "$line" | sed -E 's/[[:space:]]+#[[:space:]].*$//; s/[[:space:]]+$//')"
    run_variants "$no" "$cmd"
  fi
done <"$ROOT/README.md"

echo "$blocks code blocks, $ran checks, $fails failures"
[ $fails -eq 0 ] && [ $ran -gt $blocks ]
