#!/usr/bin/env bash
# Installs the Debian packages the end-to-end tests use, when missing.
# Go modules come through the module proxy on the first build.
set -euo pipefail
need=()
pkgs=("$@")
# Node.js and npm run the TypeScript SDK clients of the end-to-end tests:
# Debian's, unless a Node.js is installed already.
if ! command -v node >/dev/null 2>&1; then
  pkgs+=(nodejs npm)
fi
for pkg in "${pkgs[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${need[*]}; run as root or install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Quiet unless it fails: apt and debconf talk a lot; the log is printed on
# failure.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: installing ${need[*]} failed" >&2
  exit 1
fi
