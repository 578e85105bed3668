package core

import (
	"context"
	"io"
)

// FileStore keeps parley's own copies of the files it sends and receives:
// what an agent posts with chat.assistant.post, and what people send an
// agent on a platform. A file is copied once, when it enters parley, and
// every later use (each platform's delivery, a restart's replay, the agent
// reading a person's file) reads that copy, so a file changed, replaced or
// removed after it was accepted changes nothing. Copies are named by their
// content (Attachment.Digest); the store bounds their total size and
// removes those nothing refers to any more (store/files documents when).
//
// The methods are safe for concurrent use.
type FileStore interface {
	// Put copies r, at most max bytes, and returns the attachment that
	// refers to the copy, with name and mime as given. The copy is
	// durable when Put returns: append the message that refers to it
	// only then. It is also held (not removed) until Release: call
	// Release once that message is appended, or given up. Put returns
	// ErrFileTooLarge past max, ErrFileStoreFull past the store's total,
	// and r's errors; it keeps nothing then.
	Put(ctx context.Context, name, mime string, r io.Reader, max int64) (Attachment, error)
	// Release lets the copies of as go once nothing refers to them (see
	// Put). Attachments Put did not return are ignored.
	Release(as ...Attachment)
	// Open opens the copy a refers to for reading, after checking that
	// its content is a.Size bytes with digest a.Digest; the caller closes
	// it. It fails for an attachment with no Digest (stored before parley
	// kept copies) and when no intact copy is found: retrying does not
	// help.
	Open(a Attachment) (io.ReadCloser, error)
}
