# The admin API's generated Go code (proto/): included from the Makefile.
# protoc comes from Debian; its plugins protoc-gen-go and protoc-gen-go-grpc
# are pinned in go.mod's tool block and run with `go tool`.

.PHONY: proto
proto: ## Regenerate the Go code under proto/ (installs protoc when missing; plugins via go tool).
	@scripts/gen-proto.sh

.PHONY: proto-check
proto-check: ## Fail when the generated Go code under proto/ is stale.
	@scripts/gen-proto.sh --check
