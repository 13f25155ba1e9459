//go:build !race

package raftrep_test

const raceEnabled = false
