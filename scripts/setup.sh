# Shared set-up for scripts/llmlab and scripts/test (sourced, not run): installs the Debian
# packages that are missing (quietly, and not at all when everything is there), then
# configures and builds build/ with CMake in Release mode.
set -euo pipefail

LLMLAB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LLMLAB_PACKAGES=(cmake make gcc pkg-config liblua5.4-dev libreadline-dev libopenmpi-dev openmpi-bin
  libcmocka-dev libopenblas-dev libopenblas-openmp-dev zlib1g-dev tmux)

llmlab_install_missing() {
  local missing=()
  for p in "${LLMLAB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "llmlab: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

llmlab_build() {
  local build="$LLMLAB_ROOT/build"
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$LLMLAB_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  local log
  log="$(mktemp)"
  if ! cmake --build "$build" -j "$(nproc)" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "llmlab: the build failed" >&2
    exit 1
  fi
  grep -iE 'warning' "$log" >&2 || true
  rm -f "$log"
}

llmlab_install_missing
llmlab_build
