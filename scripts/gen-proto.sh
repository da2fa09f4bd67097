#!/usr/bin/env bash
# Regenerates the Go code of the protobuf APIs under proto/ with protoc,
# protoc-gen-go and protoc-gen-go-grpc, installing what is missing:
# protoc and the well-known types from Debian (protobuf-compiler,
# libprotobuf-dev) when running as root, the two plugins
# with `go install` into bin/tools at pinned versions.
#
#   scripts/gen-proto.sh           regenerate next to the .proto files
#   scripts/gen-proto.sh --check   regenerate into a temporary directory and
#                                  fail when the checked-in code differs
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
# protoc-gen-go must match the protobuf runtime in go.mod; protoc-gen-go-grpc
# is a released version whose output the grpc module in go.mod supports.
PROTOC_GEN_GO_VERSION=$("$GO" list -m -f '{{.Version}}' google.golang.org/protobuf)
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
TOOLS=$PWD/bin/tools

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

# protoc finds the well-known types (google/protobuf/*.proto) in ../include
# next to its binary: Debian ships them in libprotobuf-dev.
protoc_ready() {
  local bin
  bin=$(command -v protoc) || return 1
  [ -f "$(dirname "$bin")/../include/google/protobuf/any.proto" ]
}
if ! protoc_ready; then
  scripts/install-deps.sh protobuf-compiler libprotobuf-dev
  protoc_ready || { echo "gen-proto: protoc or its include/google/protobuf is missing" >&2; exit 1; }
fi

# install_tool PACKAGE VERSION installs PACKAGE@VERSION into $TOOLS unless the
# binary there was already built from that version.
install_tool() {
  local pkg=$1 version=$2 bin
  bin=$TOOLS/$(basename "$pkg")
  if [ -x "$bin" ] && "$GO" version -m "$bin" 2>/dev/null | grep -q "[[:space:]]mod[[:space:]].*[[:space:]]$version[[:space:]]"; then
    return
  fi
  GOBIN=$TOOLS "$GO" install "$pkg@$version"
}
install_tool google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_tool google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

out=proto
if $check; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# Relative paths under -I proto keep machine paths out of the generated code.
mapfile -t files < <(cd proto && find . -name '*.proto' -printf '%P\n' | LC_ALL=C sort)
protoc -I proto \
  --plugin=protoc-gen-go="$TOOLS/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$TOOLS/protoc-gen-go-grpc" \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  "${files[@]}"

if $check; then
  # Compare only generated files, and not the protoc version the header
  # records: the code protoc's plugins write does not depend on it.
  if ! diff -r -u -x '*.proto' -x '*.md' -x doc.go -x '*_test.go' \
      -I '^//[[:space:]]*\(-[[:space:]]*\)\?protoc[[:space:]]\+\(v[0-9]\|(unknown)\)' \
      "$out" proto; then
    echo "gen-proto: the generated code under proto/ is stale; run 'make proto'" >&2
    exit 1
  fi
fi
