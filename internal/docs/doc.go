// Package docs holds no code: its tests check the repository's Markdown
// documentation (README.md, CONTRIBUTING.md and docs/*.md) against the
// repository itself, so that a moved file, a renamed heading or a new
// dependency shows up as a failing test rather than as a dead link.
package docs
