#!/usr/bin/env bash
# CI's Docker step: builds docker/Dockerfile into an image and runs the smoke
# test (test/docker/image.test.ts) against it, on a dockerd of its own. Runs
# after `npm run test:fresh` in .ci/run (PostgreSQL, Redis and ClickHouse
# installed and on loopback, which the scale-out part of the smoke test uses).
#
# - Installs Debian's docker.io and debootstrap when missing (apt-get).
# - Starts dockerd with its own socket, data root, exec root and PID file
#   under $TI_DOCKER_CACHE (~/.cache/trace-ingest/docker), so the base image
#   and the layer cache survive between runs on one machine; without iptables
#   rules or IP forwarding (published ports go through docker-proxy on
#   loopback), and stops it by its PID at the end.
# - No image registry is reachable here: the Dockerfile's FROM is made by
#   docker/stand-in/make-base.sh (a STAND-IN, see there) unless it exists.
# - Builds with the legacy builder (BuildKit fetches its frontend from Docker
#   Hub) and --network host, and passes this machine's CA bundle (in the
#   stand-in) as NODE_EXTRA_CA_CERTS: the npm registry is reached through a
#   TLS-intercepting mirror. The Dockerfile needs none of it elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin" ;; esac

say() { printf 'docker-ci: %s\n' "$*"; }
stop() {
  printf 'docker-ci: %s\n' "$*" >&2
  exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# shellcheck source=scripts/node-env.sh
source scripts/node-env.sh
NODE_VERSION=$TI_NODE_VERSION
# The npm that the Node.js release bundles (its CHANGELOG: npm 11.19.0 since 24.20.0), as the official image has.
NODE_BUNDLED_NPM=11.19.0
# The image the Dockerfile's stages start from (the first FROM that names an image, not a stage).
BASE=$(sed -n 's/^FROM \([^ ]*:[^ ]*\).*/\1/p' docker/Dockerfile | head -n1)
[ "$BASE" = "node:$NODE_VERSION-bookworm-slim" ] ||
  stop "docker/Dockerfile builds FROM '$BASE' but scripts/node-env.sh pins Node.js $NODE_VERSION: make them agree"
IMAGE=${TI_DOCKER_IMAGE:-trace-ingest:ci}
CACHE=${TI_DOCKER_CACHE:-${HOME:-/root}/.cache/trace-ingest/docker}

# --- Debian packages.
missing=()
have dockerd || missing+=(docker.io)
have debootstrap || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] && have apt-get || stop "missing ${missing[*]}: install them (apt-get install ${missing[*]}) or run as root"
  say "installing ${missing[*]} (apt-get)"
  apt-get update -qq >/dev/null || stop "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || stop "apt-get install ${missing[*]} failed"
fi

# --- dockerd of our own.
mkdir -p "$CACHE"
SOCK="$CACHE/docker.sock"
PIDFILE="$CACHE/dockerd.pid"
export DOCKER_HOST="unix://$SOCK"
# A daemon left by an interrupted run of this script (same PID file) is ours: stop it first.
if [ -f "$PIDFILE" ]; then
  old=$(cat "$PIDFILE")
  if [ -n "$old" ] && [ "$(cat "/proc/$old/comm" 2>/dev/null)" = dockerd ]; then
    say "stopping the dockerd left by an earlier run (pid $old)"
    kill "$old"
    for _ in $(seq 1 60); do [ -e "/proc/$old" ] || break; sleep 0.5; done
  fi
  rm -f "$PIDFILE"
fi
forward_policy=$(iptables -S FORWARD 2>/dev/null | sed -n 's/^-P FORWARD //p' || true)
ip_forward=$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null || true)
had_bridge=0
ip link show docker0 >/dev/null 2>&1 && had_bridge=1
DOCKERD_PID=
cleanup() {
  local rc=$?
  if [ -n "$DOCKERD_PID" ]; then
    # Containers of this run only (labelled by the smoke test); the images and layers stay cached.
    docker ps -aq --filter label=trace-ingest.smoke | xargs -r docker rm -f >/dev/null 2>&1 || true
    kill "$DOCKERD_PID" 2>/dev/null || true
    for _ in $(seq 1 60); do [ -e "/proc/$DOCKERD_PID" ] || break; sleep 0.5; done
    [ -e "/proc/$DOCKERD_PID" ] && kill -9 "$DOCKERD_PID" 2>/dev/null
  fi
  if [ -n "$forward_policy" ] && [ "$(iptables -S FORWARD 2>/dev/null | sed -n 's/^-P FORWARD //p')" != "$forward_policy" ]; then
    iptables -P FORWARD "$forward_policy" || true
  fi
  [ -n "$ip_forward" ] && [ "$(cat /proc/sys/net/ipv4/ip_forward)" != "$ip_forward" ] && echo "$ip_forward" >/proc/sys/net/ipv4/ip_forward
  [ "$had_bridge" -eq 0 ] && ip link show docker0 >/dev/null 2>&1 && ip link delete docker0 2>/dev/null
  exit "$rc"
}
trap cleanup EXIT
say "starting dockerd ($SOCK, data root $CACHE/data)"
dockerd --data-root "$CACHE/data" --exec-root "$CACHE/exec" --pidfile "$PIDFILE" -H "$DOCKER_HOST" \
  --iptables=false --ip-forward=false --log-level warn >"$CACHE/dockerd.log" 2>&1 &
DOCKERD_PID=$!
for _ in $(seq 1 60); do docker version >/dev/null 2>&1 && break; sleep 0.5; done
docker version >/dev/null 2>&1 || {
  tail -n 20 "$CACHE/dockerd.log" >&2
  stop "dockerd did not answer on $SOCK (log: $CACHE/dockerd.log)"
}

# --- The base image: the official one where a registry answers, else the stand-in (kept up to date).
stand_in() { docker image inspect -f '{{index .Config.Labels "trace-ingest.stand-in"}}' "$BASE" 2>/dev/null; }
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  timeout 60 docker pull -q "$BASE" >/dev/null 2>&1 || say "no registry answered for $BASE: making a stand-in"
fi
if ! docker image inspect "$BASE" >/dev/null 2>&1 || [ -n "$(stand_in)" ]; then
  docker/stand-in/make-base.sh "$BASE" "$NODE_VERSION" "$NODE_BUNDLED_NPM" "$CACHE/stand-in"
fi

# --- The image.
build_args=()
if [ -n "$(stand_in)" ]; then
  build_args+=(--network host --build-arg NODE_EXTRA_CA_CERTS=/usr/local/share/stand-in/host-ca.pem)
fi
say "building $IMAGE from docker/Dockerfile"
t0=$(date +%s)
DOCKER_BUILDKIT=0 docker build -f docker/Dockerfile -t "$IMAGE" "${build_args[@]}" . >"$CACHE/build.log" 2>&1 || {
  tail -n 40 "$CACHE/build.log" >&2
  stop "docker build failed (log: $CACHE/build.log)"
}
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
say "built $IMAGE in $(($(date +%s) - t0)) s: $((size / 1000000)) MB"
# The build stages' layers are the cache of the next run: only those unused for a week go.
docker image prune -f --filter until=168h >/dev/null

# --- The smoke test (vitest, apart from npm test; it uses the test helpers and the servers on loopback).
[ -f node_modules/.package-lock.json ] || npm ci --no-audit --no-fund
TI_IMAGE="$IMAGE" npx vitest run --config test/docker/vitest.config.ts
