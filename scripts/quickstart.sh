#!/usr/bin/env bash
# Sets actorloop up on a fresh machine with Node 20: installs the system packages the product and
# its tests need when they are missing (nats-server, bubblewrap, ripgrep, git, chromium), checks
# that bubblewrap can create namespaces, then builds and runs the demo on the embedded defaults
# (an embedded nats-server, LMDB, the scripted model).
set -euo pipefail
cd "$(dirname "$0")/.."

# command on PATH → Debian package that provides it
declare -A PACKAGE_OF=([nats-server]=nats-server [bwrap]=bubblewrap [rg]=ripgrep [git]=git [chromium]=chromium)
ORDER=(nats-server bwrap rg git chromium)

# Debian installs nats-server under /usr/sbin, which a user's PATH may lack.
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

missing=()
for cmd in "${ORDER[@]}"; do have "$cmd" || missing+=("${PACKAGE_OF[$cmd]}"); done

if [ "${#missing[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian packages: ${missing[*]}"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null 2>&1 || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 2; }
      SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing: ${missing[*]}. Install them with your system's package manager (nats-server may also come from https://docs.nats.io, or set NATS_URL to a server with JetStream), then run this again." >&2
    exit 2
  fi
fi

# Installed is not enough: without user namespaces bwrap fails, the shell tool would ask before
# every call, and the sandbox tests would fail.
if ! bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc -- true 2>/dev/null; then
  echo "bubblewrap is installed but cannot create namespaces here (user namespaces disabled?):" >&2
  echo "  enable them (sysctl kernel.unprivileged_userns_clone=1, or run where namespaces are allowed); the shell sandbox and its tests need it" >&2
  exit 2
fi

npm ci --no-audit --no-fund
npm run build
node bin/actorloop.js demo
