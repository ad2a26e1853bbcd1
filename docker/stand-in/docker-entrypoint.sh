#!/bin/sh
# The stand-in's entry point, behaving as the official node image's: a first
# argument that is an option or no command on PATH is given to node.
set -e
if [ "${1#-}" != "$1" ] || { [ -n "$1" ] && ! command -v -- "$1" >/dev/null 2>&1; }; then
  set -- node "$@"
fi
exec "$@"
