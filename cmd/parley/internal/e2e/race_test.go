//go:build race

package e2e

// raceBuild says the tests run with the race detector, so that the
// binary they build (parleyBin) has it too.
const raceBuild = true
