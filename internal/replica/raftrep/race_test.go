//go:build race

package raftrep_test

// raceEnabled: the race detector slows the power-loss test some tenfold,
// so make test runs it at length without (make powerloss).
const raceEnabled = true
