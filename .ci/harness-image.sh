#!/usr/bin/env bash
# The harness's own image (Dockerfile), built where no registry is reachable and smoke
# tested: the base from Debian's packages (.ci/python-image.sh), and every wheel the image
# installs fetched here first, into .wheelhouse/ (the image installs from it alone, at the
# versions uv.lock pins). Then `docker run IMAGE harness --version` must answer.
#
#   .ci/harness-image.sh [TAG]     default TAG tenant-queue-bench:ci
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-tenant-queue-bench:ci}
base=tenant-queue-bench-base:bookworm
.ci/python-image.sh "$base"

rm -rf .wheelhouse
mkdir -p .wheelhouse
trap 'rm -rf .wheelhouse' EXIT  # in the build's context only while it builds
.venv/bin/uv export --locked --no-dev --no-emit-project --no-hashes --format requirements-txt \
  >.wheelhouse/requirements.txt
.venv/bin/python -m pip wheel --quiet --wheel-dir .wheelhouse -r .wheelhouse/requirements.txt
.venv/bin/uv build --wheel --out-dir .wheelhouse >/dev/null
docker build --quiet --tag "$tag" --build-arg BASE="$base" \
  --build-arg INSTALL="--no-index --find-links /src/.wheelhouse tenant-queue-bench" . >/dev/null
version=$(docker run --rm "$tag" harness --version)
echo "$tag: built; docker run $tag harness --version -> $version"
expected=$(.venv/bin/harness --version)
[ "$version" = "$expected" ] || { echo "error: expected '$expected'" >&2; exit 1; }
