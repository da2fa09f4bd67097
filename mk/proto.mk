# The admin API's generated Go code (proto/): included from the Makefile.

.PHONY: proto
proto: ## Regenerate the Go code under proto/ (installs protoc and its plugins when missing).
	@scripts/gen-proto.sh

.PHONY: proto-check
proto-check: ## Fail when the generated Go code under proto/ is stale.
	@scripts/gen-proto.sh --check
