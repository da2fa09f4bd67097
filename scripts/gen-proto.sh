#!/usr/bin/env bash
# Regenerates the Go code of the protobuf APIs under proto/ with protoc,
# protoc-gen-go and protoc-gen-go-grpc, installing what is missing:
# protoc and the well-known types from Debian (protobuf-compiler,
# libprotobuf-dev) when running as root. The two plugins are pinned in
# go.mod's tool block and run through `go tool`, which builds them once into
# the Go build cache.
#
#   scripts/gen-proto.sh           regenerate next to the .proto files
#   scripts/gen-proto.sh --check   regenerate into a temporary directory and
#                                  fail when the checked-in code differs
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}

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

# protoc runs plugins by path: `go tool -n` builds a pinned tool (quietly,
# once) and prints where. protoc-gen-go comes from the protobuf module the
# code links against, so the generated code always matches its runtime.
plugin_go=$("$GO" tool -n protoc-gen-go)
plugin_go_grpc=$("$GO" tool -n protoc-gen-go-grpc)

out=proto
if $check; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# Relative paths under -I proto keep machine paths out of the generated code.
mapfile -t files < <(cd proto && find . -name '*.proto' -printf '%P\n' | LC_ALL=C sort)
protoc -I proto \
  --plugin=protoc-gen-go="$plugin_go" \
  --plugin=protoc-gen-go-grpc="$plugin_go_grpc" \
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
