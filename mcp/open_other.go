//go:build !unix

package mcp

import "os"

// openPath opens p for reading; the path was resolved already.
func openPath(p string) (*os.File, error) { return os.Open(p) }

// readable opens p again; the caller checks that it is the same file.
func readable(_ *os.File, p string) (*os.File, error) { return os.Open(p) }
