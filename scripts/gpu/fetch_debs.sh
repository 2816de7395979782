#!/usr/bin/env bash
# Downloads the Debian packages of scripts/gpu/debs.txt and their dependencies into .deps/
# (git-ignored), on a machine that has a package registry, for a GPU machine that has none.
# Packages every Debian/Ubuntu image already has (libc, libgcc, libstdc++ and the like) are
# left out: the prefix must not shadow the image's own, newer, libraries.
#   scripts/gpu/fetch_debs.sh        then copy the checkout (with .deps/) to the GPU machine
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="$ROOT/.deps"
mkdir -p "$DEST"
mapfile -t want < <(grep -v '^\s*#' "$ROOT/scripts/gpu/debs.txt" | grep -v '^\s*$')
skip='^(libc6|libgcc-s1|libstdc\+\+6|gcc-[0-9]+-base|libgomp1|libgfortran5|libquadmath0|debconf|dpkg|perl-base|libcrypt1|zlib1g|tar|coreutils|bash|libselinux1|libzstd1|liblzma5|libbz2-1\.0|libtinfo6|libncursesw6|libncurses6)$'
mapfile -t all < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "${want[@]}" | grep -E '^[a-z0-9]' | sort -u | grep -Ev "$skip")
echo "fetching ${#all[@]} packages into $DEST"
cd "$DEST"
apt-get download "${all[@]}"
du -sh "$DEST"
