// Package toolsheader is the Go middleware of docs/tools-header.md, kept
// here so that the snippet the documentation shows is code that compiles
// and is tested: an MCP server built with the official go-sdk keeps in its
// tools/list answers only the tools extauthz's signed tools header allows.
// filter.go is the snippet, byte for byte after its package clause
// (TestDocumentedSnippet); the tests run it behind the forward-auth front
// end with a real go-sdk server and client. The service does not use it.
package toolsheader
