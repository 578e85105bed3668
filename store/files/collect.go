package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
)

// collectPage is how many journal entries or messages Collect reads at a
// time.
const collectPage = 1000

// Collected counts what Collect removed.
type Collected struct {
	Files int   // copies and temporary files
	Bytes int64 // their size
}

// Collect removes the copies nothing holds any more (see the package
// documentation): none referred to by an event of st's delivery journal or
// by a message of st newer than keepSince, none held by this process, none
// put or released while it runs, none put in the last Fresh; and the
// temporary files of Puts no longer running, once Fresh-old. It returns
// what it removed so far when ctx ends or the store fails.
func (s *Store) Collect(ctx context.Context, st core.Store, keepSince time.Time) (Collected, error) {
	s.collectMu.Lock()
	defer s.collectMu.Unlock()
	start := s.opts.Now()
	s.mu.Lock()
	s.touched = map[string]bool{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.touched = nil
		s.mu.Unlock()
	}()
	refs, err := references(ctx, st, keepSince)
	if err != nil {
		return Collected{}, err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return Collected{}, fmt.Errorf("files: %w", err)
	}
	cut := start.Add(-Fresh)
	var done Collected
	for _, e := range entries {
		name := e.Name()
		if !ours(name) || refs[name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return done, err
		}
		if n, ok := s.remove(name, cut); ok {
			done.Files++
			done.Bytes += n
		}
	}
	return done, nil
}

// remove removes the copy or temporary file name if nothing of this
// process holds it and it is older than cut, and returns its size.
func (s *Store) remove(name string, cut time.Time) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[name] > 0 || s.touched[name] || s.writing[name] {
		return 0, false
	}
	// Read again under the lock: a Put may have renamed the same content
	// over it since the directory was listed.
	p := filepath.Join(s.dir, name)
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(cut) {
		return 0, false
	}
	if err := os.Remove(p); err != nil {
		return 0, false
	}
	s.total -= fi.Size()
	return fi.Size(), true
}

// references are the names of the copies st's journal refers to, and
// those its messages newer than keepSince do.
func references(ctx context.Context, st core.Store, keepSince time.Time) (map[string]bool, error) {
	refs := map[string]bool{}
	add := func(as []core.Attachment) {
		for _, a := range as {
			if !validDigest(a.Digest) {
				continue
			}
			refs[blobName(a.Digest, a.Name)] = true
			if b := filepath.Base(a.Path); isBlob(b) && strings.HasPrefix(b, a.Digest) {
				refs[b] = true
			}
		}
	}
	for after := uint64(0); ; {
		page, err := st.Deliveries(ctx, after, collectPage)
		if err != nil {
			return nil, fmt.Errorf("files: the journal's files: %w", err)
		}
		for _, d := range page {
			if d.Event.Message != nil {
				add(d.Event.Message.Attachments)
			}
			after = d.Event.Seq
		}
		if len(page) < collectPage {
			break
		}
	}
	var after core.MessageID
	if ms := keepSince.UnixMilli(); ms > 0 {
		after = core.MessageID(core.EncodeID(uint64(ms), [10]byte{}))
	}
	for {
		msgs, err := st.Inbox(ctx, "", after, collectPage)
		if err != nil {
			return nil, fmt.Errorf("files: the messages' files: %w", err)
		}
		for _, m := range msgs {
			add(m.Attachments)
		}
		if len(msgs) < collectPage {
			return refs, nil
		}
		after = msgs[len(msgs)-1].ID
	}
}
