#!/bin/sh
# The entrypoint of the harness's local stand-in for a postgres:<major> image (our own
# script, not the official image's), honouring the same variables on the first start:
# POSTGRES_USER (default postgres), POSTGRES_PASSWORD (required), POSTGRES_DB (default:
# the user's name). The cluster is made by initdb as the user postgres, never root;
# then postgres runs in the foreground, listening on 5432 on every address, with
# password authentication (scram-sha-256) over TCP and trust on the local socket only.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "error: POSTGRES_PASSWORD must be set (as for the official image)" >&2
    exit 1
  fi
  user=${POSTGRES_USER:-postgres}
  database=${POSTGRES_DB:-$user}
  password_file=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$password_file"
  initdb -D "$PGDATA" --username="$user" --pwfile="$password_file" \
    --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8
  rm -f "$password_file"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  if [ "$database" != postgres ]; then
    quoted=$(printf '%s' "$database" | sed 's/"/""/g')
    echo "create database \"$quoted\";" | postgres --single -D "$PGDATA" -j postgres >/dev/null
  fi
  echo "stand-in postgres:${PG_MAJOR:-17}: cluster made for user '$user', database '$database'"
fi

exec "$@"
