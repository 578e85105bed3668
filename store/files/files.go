package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// DefaultMaxTotal is Options.MaxTotal when zero: 2 GiB of copies, some
// forty messages with ten files of 50 MiB each, or thousands of screenshots
// and logs within the retention.
const DefaultMaxTotal = 2 << 30

// Fresh is how long after its last Put a copy nothing refers to is kept
// (see the package documentation).
const Fresh = 10 * time.Minute

// tempPrefix starts the names of copies being written.
const tempPrefix = ".put-"

// Options configure a Store.
type Options struct {
	// MaxTotal bounds the bytes of all copies; zero means DefaultMaxTotal.
	MaxTotal int64
	// Setting names where the operator changes MaxTotal, for the error of
	// a full store ("files_max_mb (PARLEY_FILES_MAX_MB)"); empty names
	// none.
	Setting string
	// Now is the clock copies are dated by; nil means time.Now.
	Now func() time.Time
}

// Store is core.FileStore on one directory. Make one with New.
type Store struct {
	dir  string
	opts Options

	// collectMu lets one Collect run at a time.
	collectMu sync.Mutex

	mu sync.Mutex
	// total is the bytes of the copies and temporary files in dir, and of
	// those being written.
	total int64
	// held counts, per copy's name, the Puts not yet released.
	held map[string]int
	// writing are the temporary files Puts are writing.
	writing map[string]bool
	// touched, while Collect runs, are the copies put or released since
	// it began: it read the store before their message may have been
	// appended, and leaves them to the next run.
	touched map[string]bool
}

var _ core.FileStore = (*Store)(nil)

// New opens the store in dir, making the directory (mode 0700) if needed.
func New(dir string, opts Options) (*Store, error) {
	if opts.MaxTotal <= 0 {
		opts.MaxTotal = DefaultMaxTotal
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	s := &Store{dir: dir, opts: opts, held: map[string]int{}, writing: map[string]bool{}}
	for _, e := range entries {
		if !ours(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil {
			s.total += fi.Size()
		}
	}
	return s, nil
}

// Dir is the directory the copies are in.
func (s *Store) Dir() string { return s.dir }

// Total is the bytes the copies take now, those being written included.
func (s *Store) Total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Put implements core.FileStore.
func (s *Store) Put(ctx context.Context, name, mime string, r io.Reader, max int64) (core.Attachment, error) {
	tmp, err := os.CreateTemp(s.dir, tempPrefix+"*")
	if err != nil {
		return core.Attachment{}, fmt.Errorf("files: %w", err)
	}
	temp := filepath.Base(tmp.Name())
	s.mu.Lock()
	s.writing[temp] = true
	s.mu.Unlock()
	w := &copier{ctx: ctx, s: s, f: tmp, h: sha256.New(), max: max}
	a, err := s.put(tmp, w, r, name, mime)
	s.mu.Lock()
	delete(s.writing, temp)
	if err != nil {
		s.total -= w.reserved
	}
	s.mu.Unlock()
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return core.Attachment{}, err
	}
	return a, nil
}

// put copies r into tmp through w and renames it to the copy's name.
func (s *Store) put(tmp *os.File, w *copier, r io.Reader, name, mime string) (core.Attachment, error) {
	if _, err := io.CopyBuffer(w, r, make([]byte, 64<<10)); err != nil {
		if errors.Is(err, core.ErrFileTooLarge) || errors.Is(err, core.ErrFileStoreFull) {
			return core.Attachment{}, err
		}
		return core.Attachment{}, fmt.Errorf("files: copy %s: %w", name, err)
	}
	now := s.opts.Now()
	if err := tmp.Chmod(0o400); err != nil {
		return core.Attachment{}, fmt.Errorf("files: %w", err)
	}
	if err := os.Chtimes(tmp.Name(), now, now); err != nil {
		return core.Attachment{}, fmt.Errorf("files: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return core.Attachment{}, fmt.Errorf("files: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return core.Attachment{}, fmt.Errorf("files: %w", err)
	}
	digest := hex.EncodeToString(w.h.Sum(nil))
	blob := blobName(digest, name)
	path := filepath.Join(s.dir, blob)
	s.mu.Lock()
	var old int64
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		old = fi.Size()
	}
	err := os.Rename(tmp.Name(), path)
	if err == nil {
		// The copy replaced holds the same bytes; the reservation counts
		// them once.
		s.total -= old
		s.held[blob]++
		if s.touched != nil {
			s.touched[blob] = true
		}
	}
	s.mu.Unlock()
	if err != nil {
		return core.Attachment{}, fmt.Errorf("files: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		s.Release(core.Attachment{Name: name, Digest: digest})
		return core.Attachment{}, fmt.Errorf("files: %w", err)
	}
	return core.Attachment{Name: name, Mime: mime, Size: w.n, Path: path, Digest: digest}, nil
}

// copier writes what Put reads to the temporary file and the hash,
// counting it against max and the store's total as it goes.
type copier struct {
	ctx      context.Context
	s        *Store
	f        *os.File
	h        hash.Hash
	max      int64
	n        int64 // written
	reserved int64 // counted in the store's total
}

func (c *copier) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if c.n+int64(len(p)) > c.max {
		return 0, fmt.Errorf("more than %d bytes: %w", c.max, core.ErrFileTooLarge)
	}
	if err := c.s.reserve(int64(len(p))); err != nil {
		return 0, err
	}
	c.reserved += int64(len(p))
	n, err := c.f.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// reserve counts n more bytes in the total, or fails when they do not fit.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total+n > s.opts.MaxTotal {
		return s.full()
	}
	s.total += n
	return nil
}

// full is the error of a full store, naming the setting.
func (s *Store) full() error {
	fix := "wait until older files are past the retention"
	if s.opts.Setting != "" {
		fix = "raise " + s.opts.Setting + ", or " + fix
	}
	return fmt.Errorf("%w: its copies take %d MiB, the most it keeps; %s", core.ErrFileStoreFull, s.opts.MaxTotal>>20, fix)
}

// Release implements core.FileStore.
func (s *Store) Release(as ...core.Attachment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range as {
		if !validDigest(a.Digest) {
			continue
		}
		blob := blobName(a.Digest, a.Name)
		switch n := s.held[blob]; {
		case n > 1:
			s.held[blob] = n - 1
		case n == 1:
			delete(s.held, blob)
		}
		if s.touched != nil {
			s.touched[blob] = true
		}
	}
}

// Open implements core.FileStore: the copy in this store's directory, or
// else the one at a.Path (another instance's on this machine, see the
// package documentation), whichever is intact.
func (s *Store) Open(a core.Attachment) (io.ReadCloser, error) {
	if !validDigest(a.Digest) {
		return nil, fmt.Errorf("files: %s has no copy: it was accepted by a parley that did not keep copies of files, and its path is not read again", a.Name)
	}
	blob := blobName(a.Digest, a.Name)
	paths := []string{filepath.Join(s.dir, blob)}
	if p := filepath.Clean(a.Path); filepath.IsAbs(p) && p != paths[0] && filepath.Base(p) == blob {
		paths = append(paths, p)
	}
	var errs []error
	for _, p := range paths {
		f, err := openCopy(p, a)
		if err == nil {
			return f, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("files: no intact copy of %s (sha256 %s) on this machine: %w", a.Name, a.Digest, errors.Join(errs...))
}

// openCopy opens the copy at p if it holds a's content.
func openCopy(p string, a core.Attachment) (*os.File, error) {
	f, err := os.OpenFile(p, openFlags, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file", p)
	case fi.Size() != a.Size:
		err = fmt.Errorf("%s holds %d bytes, not %d", p, fi.Size(), a.Size)
	}
	if err == nil {
		h := sha256.New()
		if _, err = io.Copy(h, f); err == nil && hex.EncodeToString(h.Sum(nil)) != a.Digest {
			err = fmt.Errorf("%s was changed: its content is not the copy's", p)
		}
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// blobName is the name of the copy of content with digest, for a file
// named name: the digest, and name's extension when it is a short plain
// one.
func blobName(digest, name string) string {
	ext := strings.ToLower(filepath.Ext(name))
	if len(ext) < 2 || len(ext) > 11 || strings.IndexFunc(ext[1:], func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}) >= 0 {
		ext = ""
	}
	return digest + ext
}

// isBlob reports whether name is a copy's (blobName).
func isBlob(name string) bool {
	if len(name) < sha256.Size*2 || !validDigest(name[:sha256.Size*2]) {
		return false
	}
	return blobName(name[:sha256.Size*2], name) == name
}

// ours reports whether name is a copy or a temporary file of Put's.
func ours(name string) bool { return isBlob(name) || strings.HasPrefix(name, tempPrefix) }

// validDigest reports whether d is a SHA-256 in lower-case hex.
func validDigest(d string) bool {
	if len(d) != sha256.Size*2 {
		return false
	}
	for _, c := range d {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
