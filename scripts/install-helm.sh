#!/usr/bin/env bash
# Builds the helm binary the chart test (deploy/helm) renders with, once:
# from the Go module proxy into the user's cache. HELM=/path overrides it.
set -euo pipefail
version=v3.22.0 # keep in step with helmVersion in deploy/helm/chart_test.go
dir="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/extauthz-tools/helm-$version"
if [ -n "${HELM:-}" ] || [ -x "$dir/helm" ]; then
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "install-helm: building helm $version into $dir (once)" >&2
if ! GOBIN="$dir" GOFLAGS=-buildvcs=false go install "helm.sh/helm/v3/cmd/helm@$version" >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
