#!/usr/bin/env bash
# Sets actorloop up on a fresh machine with Node 20 and runs the demo on the embedded defaults
# (an embedded nats-server, LMDB, the scripted model).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nats-server >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "nats-server is missing; installing Debian's package"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq nats-server
  else
    echo "nats-server is missing: install it (https://docs.nats.io) or set NATS_URL to a server with JetStream" >&2
    exit 2
  fi
fi

npm ci --no-audit --no-fund
npm run build
node bin/actorloop.js demo
