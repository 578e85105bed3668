package files_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/files"
)

// BenchmarkPutOpen copies 8 MiB into the store (hash, sync, rename) and
// opens it again (read and hash once more), as a post and one delivery do.
func BenchmarkPutOpen(b *testing.B) {
	s := newStore(b, b.TempDir(), files.Options{})
	content := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	b.SetBytes(int64(len(content)))
	for i := 0; b.Loop(); i++ {
		content[0] = byte(i) // a new copy each time
		a, err := s.Put(context.Background(), "f.bin", "", bytes.NewReader(content), int64(len(content)))
		if err != nil {
			b.Fatal(err)
		}
		r, err := s.Open(a)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
		r.Close()
		s.Release(a)
		os.Remove(a.Path)
	}
}

// BenchmarkCollect is one pass of Collect over a bbolt store holding
// PARLEY_BENCH_MESSAGES messages (default 20,000) within the retention,
// one in ten with a file, and as many copies: the hourly cost of keeping
// the store of files tidy, which reads every message of the retention.
func BenchmarkCollect(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("PARLEY_BENCH_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(b.TempDir(), "parley.db"), bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s := newStore(b, b.TempDir(), files.Options{})
	sess, _, err := st.CreateSession(ctx, core.Session{ID: core.NewSessionID(time.Now()), Title: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		m := core.Message{Session: sess.ID, Role: core.RoleUser, Origin: "telegram", Content: fmt.Sprintf("message %d with some words in it", i)}
		if i%10 == 0 {
			a := put(b, s, fmt.Sprintf("f%d.txt", i), fmt.Sprint("file ", i))
			s.Release(a)
			m.Attachments = []core.Attachment{a}
		}
		if _, err := st.Append(ctx, core.Append{Message: m}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		c, err := s.Collect(ctx, st, time.Now().Add(-30*24*time.Hour))
		if err != nil || c.Files != 0 {
			b.Fatalf("collected %+v, %v", c, err)
		}
	}
	b.ReportMetric(float64(n), "messages")
}
