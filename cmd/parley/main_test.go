package main

import (
	"testing"

	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// TestMain lets tests start throwaway PostgreSQL servers (pgtest), whose
// template cluster is removed when the tests end.
func TestMain(m *testing.M) {
	pgtest.Main(m)
}
