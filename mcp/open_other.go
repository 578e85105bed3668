//go:build !unix

package mcp

import "os"

// openNoFollow opens p for reading; the path was resolved already.
func openNoFollow(p string) (*os.File, error) { return os.Open(p) }
