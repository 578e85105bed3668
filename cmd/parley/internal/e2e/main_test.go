package e2e

import (
	"os"
	"testing"

	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// TestMain lets tests start throwaway PostgreSQL servers (pgtest), whose
// template cluster is removed when the tests end, and removes the parley
// binary the child-process tests built (parleyBin).
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}
