package inbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parley-chat/parley/core"
)

// Files people send are copied as they are downloaded into parley's store
// of files (core.FileStore), and the agent is handed that copy: what it
// reads is what was received, whatever happens to anything else on disk,
// and the copy is removed with the store's rules (past the retention). An
// adapter puts a download with Put, submits the message that carries the
// attachment, and then releases it (core.FileStore.Release).

// Put copies a download, at most max bytes, into files, with the file's
// name as people gave it (made safe by the caller) and its type. A file
// too large or a full store is refused for good, with words a person can
// read (core.Permanent); a failed read is not, so the update is fetched
// again. Nil files refuses every file.
func Put(ctx context.Context, files core.FileStore, name, mime string, body io.Reader, max int64) (core.Attachment, error) {
	if files == nil {
		return core.Attachment{}, core.Permanent(errors.New("this parley keeps no files"))
	}
	if mime == "" {
		mime = "application/octet-stream"
	}
	a, err := files.Put(ctx, name, mime, body, max)
	switch {
	case errors.Is(err, core.ErrFileTooLarge):
		return core.Attachment{}, core.Permanent(fmt.Errorf("it is larger than parley takes (%s)", Size(max)))
	case errors.Is(err, core.ErrFileStoreFull):
		return core.Attachment{}, core.Permanent(err)
	case err != nil:
		return core.Attachment{}, fmt.Errorf("save %s: %w", name, err)
	}
	return a, nil
}

// Content reads the copy of a received file (a voice note to transcribe).
func Content(files core.FileStore, a core.Attachment) ([]byte, error) {
	if files == nil {
		return nil, errors.New("this parley keeps no files")
	}
	r, err := files.Open(a)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Size writes n bytes for people: "4.2 MB", "12 KB".
func Size(n int64) string {
	if n >= 1<<20 {
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<20)), ".0") + " MB"
	}
	return fmt.Sprintf("%d KB", (n+1023)/1024)
}
