//go:build !race

package mcpresponse

const raceEnabled = false
