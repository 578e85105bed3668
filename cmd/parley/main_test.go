package main

import (
	"testing"

	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// TestMain lets tests start throwaway PostgreSQL servers (pgtest), whose
// template cluster is removed when the tests end. A test binary started as
// an instance of the cluster test serves instead (serveClusterChild).
func TestMain(m *testing.M) {
	serveClusterChild()
	pgtest.Main(m)
}
