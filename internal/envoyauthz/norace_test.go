//go:build !race

package envoyauthz

const raceEnabled = false
