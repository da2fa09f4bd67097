// Package adminv1 is the Go code generated from admin.proto, the extauthz
// admin API that `extauthz serve` answers on its admin listener and
// `extauthz admin` calls. Regenerate it with `make proto`; `make proto-check`
// fails when it is stale. Never edit the *.pb.go files by hand.
package adminv1
