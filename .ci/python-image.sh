#!/usr/bin/env bash
# A local base image with Python for the harness's own image (Dockerfile), for a Docker
# engine that reaches no image registry (this project's CI): a Debian bookworm minbase
# root filesystem made by debootstrap from Debian's packages, with python3 (3.11) and
# pip; loaded with `docker import`.
#
#   .ci/python-image.sh [TAG]      default TAG tenant-queue-bench-base:bookworm; nothing
#                                  is done if it exists (REBUILD=1 builds it again)
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-tenant-queue-bench-base:bookworm}
cache=${DEBOOTSTRAP_CACHE:-/var/cache/tenant-queue-bench/debootstrap}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ "${REBUILD:-0}" != 1 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag: already here, not rebuilt (REBUILD=1 to rebuild)"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$cache"
echo "debootstrap: Debian bookworm minbase with python3 (packages cached in $cache)"
debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates \
  --cache-dir="$cache" bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/*
tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["python3"]' \
  - "$tag" >/dev/null
echo "$tag: built ($(docker run --rm "$tag" python3 --version))"
