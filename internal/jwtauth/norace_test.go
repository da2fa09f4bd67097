//go:build !race

package jwtauth

const raceEnabled = false
