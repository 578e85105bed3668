//go:build !unix

package backup

import "os"

// openSource opens a file to restore for reading; the caller checks it is
// a regular file.
func openSource(p string) (*os.File, error) { return os.Open(p) }
