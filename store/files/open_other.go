//go:build !unix

package files

import "os"

// openFlags open a copy for reading; its content is checked after.
const openFlags = os.O_RDONLY
