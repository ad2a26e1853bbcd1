#!/usr/bin/env bash
# `npm run test:fresh`: everything the test suite needs on a fresh Debian
# machine, then the suite itself. It installs what is missing (Debian's
# clickhouse-server, postgresql, redis-server, chromium, faketime; chdb into a cache
# outside the repo; the npm dependencies), starts PostgreSQL and Redis on
# loopback when they are not running, and runs `npm test`. Where it cannot
# install (not root, no apt-get), it stops before the suite with one line
# that says what to install.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

say() { printf 'test:fresh: %s\n' "$*"; }
stop() {
  printf 'test:fresh: %s\n' "$*" >&2
  exit 1
}
# A TCP port answering on loopback (bash's /dev/tcp: no client tool needed).
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
have() { command -v "$1" >/dev/null 2>&1; }
# Debian puts servers in /usr/sbin, which a non-login PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin" ;; esac

PG_PORT=5432
REDIS_PORT=6379

# --- Node.js of the project's major (.nvmrc), fetched from the npm registry when the machine has another.
# shellcheck source=scripts/node-env.sh
source scripts/node-env.sh || stop "Node.js $(sed -n 1p .nvmrc) is required: install it, then run npm run test:fresh again"
say "Node.js $(node --version)"

# --- Debian packages that are missing.
missing=()
have clickhouse-server || have clickhouse || missing+=(clickhouse-server clickhouse-client)
if ! listening "$PG_PORT" && ! have pg_ctlcluster; then missing+=(postgresql); fi
if ! listening "$REDIS_PORT" && ! have redis-server; then missing+=(redis-server); fi
have chromium || missing+=(chromium)
have faketime || missing+=(faketime)

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=(sudo -n); fi
fi
can_install() { command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ ${#SUDO[@]} -gt 0 ]; }; }

installed_pg=0
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    stop "missing ${missing[*]} and no apt-get here: install them with your package manager (PostgreSQL and Redis may instead run on 127.0.0.1:$PG_PORT and :$REDIS_PORT), then run npm run test:fresh again"
  fi
  can_install || stop "missing ${missing[*]}: run as root, or install them first: sudo apt-get install -y ${missing[*]}"
  say "installing ${missing[*]} (apt-get)"
  "${SUDO[@]}" apt-get update -qq >/dev/null || stop "apt-get update failed: check the network or the apt sources, then run npm run test:fresh again"
  "${SUDO[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null || stop "apt-get install ${missing[*]} failed: install them by hand, then run npm run test:fresh again"
  case " ${missing[*]} " in *" postgresql "*) installed_pg=1 ;; esac
fi

# --- PostgreSQL on 127.0.0.1:5432 with trust auth for the tests (database `test`).
pg_version() { ls /etc/postgresql 2>/dev/null | sort -V | tail -n1; }
if ! listening "$PG_PORT"; then
  v=$(pg_version)
  [ -n "$v" ] || stop "PostgreSQL is installed but has no cluster: create one (pg_createcluster) or run one on 127.0.0.1:$PG_PORT"
  if [ "$installed_pg" -eq 1 ]; then
    # A cluster installed by this script serves the tests only: trust on loopback, as the tests connect without a password.
    hba="/etc/postgresql/$v/main/pg_hba.conf"
    grep -q '^host all all 127.0.0.1/32 trust' "$hba" ||
      "${SUDO[@]}" sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  say "starting PostgreSQL $v on 127.0.0.1:$PG_PORT"
  "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$v" main start >/dev/null 2>&1 ||
    can_install || stop "PostgreSQL is not running and this user cannot start it: start it (pg_ctlcluster $v main start) or run as root"
  for _ in $(seq 1 30); do listening "$PG_PORT" && break; sleep 1; done
  listening "$PG_PORT" || stop "PostgreSQL did not start on 127.0.0.1:$PG_PORT: see /var/log/postgresql/"
fi
if command -v psql >/dev/null 2>&1 && { [ "$installed_pg" -eq 1 ] || ! psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d test -Atc 'select 1' >/dev/null 2>&1; }; then
  if psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atc "select 1 from pg_database where datname = 'test'" | grep -q 1 ||
      psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc 'create database test' >/dev/null
  else
    stop "PostgreSQL on 127.0.0.1:$PG_PORT refuses user postgres without a password: allow trust for 127.0.0.1 in pg_hba.conf for the tests"
  fi
fi

# --- Redis on 127.0.0.1:6379 (nothing kept on disk).
if ! listening "$REDIS_PORT"; then
  say "starting Redis on 127.0.0.1:$REDIS_PORT"
  mkdir -p /tmp/trace-ingest-redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /tmp/trace-ingest-redis --logfile /tmp/trace-ingest-redis/redis.log >/dev/null ||
    stop "Redis did not start: see /tmp/trace-ingest-redis/redis.log"
  for _ in $(seq 1 30); do listening "$REDIS_PORT" && break; sleep 1; done
  listening "$REDIS_PORT" || stop "Redis did not start on 127.0.0.1:$REDIS_PORT: see /tmp/trace-ingest-redis/redis.log"
fi

# --- chdb (an in-process current ClickHouse, ~550 MB) checks the schema on a
# modern engine; a test tool, not a dependency, so it lives outside the repo.
CHDB_PREFIX="${CHDB_PREFIX:-${HOME:-/root}/.cache/trace-ingest/chdb}"
if [ ! -f "$CHDB_PREFIX/node_modules/chdb/package.json" ]; then
  say "installing chdb into $CHDB_PREFIX"
  mkdir -p "$CHDB_PREFIX"
  npm install --prefix "$CHDB_PREFIX" --no-save --no-audit --no-fund chdb@3.4.0 >/dev/null 2>&1 ||
    stop "npm could not install chdb@3.4.0 into $CHDB_PREFIX: check the npm registry is reachable"
fi
export CHDB_MODULE_DIR="$CHDB_PREFIX/node_modules/chdb"

# --- npm dependencies, when absent, older than the lock file, or built by another Node.js (native addons).
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] ||
  [ "$(cat node_modules/.node-version 2>/dev/null)" != "$(node --version)" ]; then
  say "installing npm dependencies (npm ci)"
  npm ci --no-audit --no-fund || stop "npm ci failed (see above)"
  node --version >node_modules/.node-version
fi

say "running npm test"
exec npm test
