#!/usr/bin/env bash
# Charts are plain text when stdout is not a terminal (a pipe, a file), under one rank and
# under -n 2 (whose ranks write to mpirun, so the launcher tells them: LLMLAB_TERM); in colour
# on a colour terminal (script(1) gives one), sized to it; never in colour with NO_COLOR.
#   test_plot_tty.sh path/to/llmlab
set -u
LLMLAB="$1"
fails=0
check() { if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
unset NO_COLOR LLMLAB_TERM
export TERM=xterm-256color
CHART="lab.plot({1, 2, 3 + lab.dist.rank()}, {title = 'tty'})"
ESC=$'\x1b\[3[0-9]m'

# widest line of a chart, in characters, colour codes and carriage returns left out
widest() {
  python3 -c 'import re, sys; print(max((len(re.sub(r"\x1b\[[0-9;]*m", "", l).rstrip("\r\n")) for l in sys.stdin.read().split("\n")), default=0))'
}

for n in 1 2; do
  out="$("$LLMLAB" -n $n -e "$CHART" | cat)"
  echo "$out" | grep -q "tty" && ! echo "$out" | grep -qE "$ESC"
  check "-n $n, stdout a pipe: plain" $?
  "$LLMLAB" -n $n -e "$CHART" >"${TMPDIR:-/tmp}/plot_tty.$$"
  grep -q "tty" "${TMPDIR:-/tmp}/plot_tty.$$" && ! grep -qE "$ESC" "${TMPDIR:-/tmp}/plot_tty.$$"
  check "-n $n, stdout a file: plain" $?
  [ "$(widest <"${TMPDIR:-/tmp}/plot_tty.$$")" -eq 80 ]
  check "-n $n, no terminal: 80 columns" $?
  rm -f "${TMPDIR:-/tmp}/plot_tty.$$"
  out="$(script -qec "stty cols 64; $LLMLAB -n $n -e \"$CHART\"" /dev/null </dev/null)"
  echo "$out" | grep -qE "$ESC"
  check "-n $n, a colour terminal: colour" $?
  w="$(echo "$out" | widest)"
  [ "$w" -eq 64 ]
  check "-n $n, a 64-column terminal: 64 columns (got $w)" $?
  out="$(NO_COLOR=1 script -qec "$LLMLAB -n $n -e \"$CHART\"" /dev/null </dev/null)"
  echo "$out" | grep -q "tty" && ! echo "$out" | grep -qE "$ESC"
  check "-n $n, NO_COLOR on a terminal: plain" $?
  out="$(TERM=dumb script -qec "$LLMLAB -n $n -e \"$CHART\"" /dev/null </dev/null)"
  echo "$out" | grep -q "tty" && ! echo "$out" | grep -qE "$ESC"
  check "-n $n, TERM=dumb: plain" $?
  out="$(env -u TERM script -qec "$LLMLAB -n $n -e \"$CHART\"" /dev/null </dev/null)"
  echo "$out" | grep -q "tty" && ! echo "$out" | grep -qE "$ESC"
  check "-n $n, no TERM: plain" $?
done
echo "$fails failures"
[ $fails -eq 0 ]
