package mcp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/parley-chat/parley/core"
)

// Files an agent sends. chat.assistant.post takes paths on the daemon's
// machine, read by the daemon with its own rights, so a path is where an
// agent could reach what the daemon can read: its environment in
// /proc/self/environ, the database, the config file with its tokens. The
// check is made where the path enters parley, here, and what was checked
// is what is delivered:
//
//   - the path is resolved through its symlinks first, and the real path
//     must lie inside one of Options.SendDirs ([mcp] send_dirs; by default
//     the directory parley was started in and the system temporary
//     directory), compared component by component;
//   - whatever SendDirs says, nothing under /proc, /sys or /dev and nothing
//     under Options.Protected (the data directory, the config file) is sent,
//     nor a hard link to one of those files;
//   - the real path is then opened once, following no symlink in any of
//     its components (openat2 with RESOLVE_NO_SYMLINKS on Linux, as a
//     handle that reads nothing, open_linux.go), and what was opened is
//     checked: its path by the system's account (/proc/self/fd) again,
//     that it is a regular file (a FIFO or a device is never read), not a
//     link to a protected file, and at most 50 MiB;
//   - that same open file is copied into parley's store of files
//     (Options.Files, core.FileStore) before the message is appended, and
//     the attachment refers to the copy. Every platform is sent the copy,
//     a restart's replay too: a file replaced, renamed over, swapped for a
//     symlink or removed after the post changes nothing, and nothing reads
//     the path again after the post.

// alwaysDenied are the trees never sent: kernel and device views that hold
// the process's environment, memory and devices.
var alwaysDenied = []string{"/proc", "/sys", "/dev"}

// DefaultSendDirs is where agents may send files from when [mcp] send_dirs
// is not set: the directory parley was started in (an agent parley runs
// works there) and the system temporary directory. A start in "/" (a
// system service) adds nothing for it: that would allow every file.
func DefaultSendDirs() []string {
	var dirs []string
	if wd, err := os.Getwd(); err == nil && filepath.Clean(wd) != string(filepath.Separator) {
		dirs = append(dirs, wd)
	}
	return append(dirs, os.TempDir())
}

// sendKey names the setting a refusal tells the operator to change.
const sendKey = "[mcp] send_dirs (PARLEY_MCP_SEND_DIRS)"

// within reports whether p is dir or lies under it. Both are clean
// absolute paths; "/tmpx" is not within "/tmp".
func within(p, dir string) bool {
	if p == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(p, dir)
}

// realPath resolves p's symlinks; a path that does not exist (yet) is
// only cleaned, which is what a protected path that is absent needs.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// denied says why the real path p may never be sent, or "".
func (s *Server) denied(p string) string {
	for _, d := range alwaysDenied {
		if within(p, realPath(d)) {
			return "it is under " + d
		}
	}
	for _, d := range s.opts.Protected {
		if d != "" && within(p, realPath(d)) {
			return "it is parley's own (" + d + ")"
		}
	}
	return ""
}

// allowed reports whether the real path p lies in a send directory.
func (s *Server) allowed(p string) bool {
	for _, d := range s.opts.SendDirs {
		if d != "" && within(p, realPath(d)) {
			return true
		}
	}
	return false
}

// refuse is the tool error for a path outside the send directories.
func (s *Server) refuse(p string) error {
	dirs := "none"
	if len(s.opts.SendDirs) > 0 {
		dirs = strings.Join(s.opts.SendDirs, ", ")
	}
	return toolError(fmt.Sprintf("file %q is not in a directory agents may send files from (%s); "+
		"put the file there, or add its directory to %s", p, dirs, sendKey))
}

// checkPath checks where the real path p lies.
func (s *Server) checkPath(given, p string) error {
	if why := s.denied(p); why != "" {
		return toolError(fmt.Sprintf("file %q is never sent: %s, whatever %s says", given, why, sendKey))
	}
	if !s.allowed(p) {
		return s.refuse(given)
	}
	return nil
}

// sameAsProtected reports whether fi is one of the protected files under
// another name (a hard link): the config file, or a file directly in the
// data directory.
func (s *Server) sameAsProtected(fi fs.FileInfo) bool {
	for _, d := range s.opts.Protected {
		if d == "" {
			continue
		}
		st, err := os.Stat(d)
		if err != nil {
			continue
		}
		if !st.IsDir() {
			if os.SameFile(st, fi) {
				return true
			}
			continue
		}
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if st, err := os.Stat(filepath.Join(d, e.Name())); err == nil && os.SameFile(st, fi) {
				return true
			}
		}
	}
	return false
}

// attachment checks one file an agent wants to send and copies it into
// the store of files; the caller releases the copy (core.FileStore) once
// the message is appended.
func (s *Server) attachment(ctx context.Context, given string) (core.Attachment, error) {
	if !filepath.IsAbs(given) {
		return core.Attachment{}, toolError(fmt.Sprintf("file %q: give an absolute path", given))
	}
	p, err := filepath.EvalSymlinks(given)
	if err != nil {
		return core.Attachment{}, toolError(fmt.Sprintf("file %q: %v", given, pathErr(err)))
	}
	if err := s.checkPath(given, p); err != nil {
		return core.Attachment{}, err
	}
	f, err := s.open(given, p)
	if err != nil {
		return core.Attachment{}, err
	}
	defer f.Close()
	a, err := s.opts.Files.Put(ctx, filepath.Base(given), mime.TypeByExtension(filepath.Ext(given)), f, maxFileSize)
	switch {
	case errors.Is(err, core.ErrFileTooLarge):
		return core.Attachment{}, toolError(fmt.Sprintf("file %q is more than %d bytes", given, maxFileSize))
	case errors.Is(err, core.ErrFileStoreFull):
		return core.Attachment{}, toolError(fmt.Sprintf("file %q not sent: %v", given, err))
	case err != nil:
		return core.Attachment{}, toolError(fmt.Sprintf("file %q: %v", given, err))
	}
	return a, nil
}

// open opens the file at the real path p once, following no symlink, and
// checks what it opened (see above); the file returned is that one, open
// for reading.
func (s *Server) open(given, p string) (*os.File, error) {
	h, err := openPath(p)
	if err != nil {
		return nil, toolError(fmt.Sprintf("file %q: %v", given, openErr(err)))
	}
	defer h.Close()
	// What was opened, by the system's account: the check again.
	if opened, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(h.Fd()))); err == nil && filepath.IsAbs(opened) && opened != p {
		if err := s.checkPath(given, opened); err != nil {
			return nil, err
		}
	}
	fi, err := h.Stat()
	switch {
	case err != nil:
		return nil, toolError(fmt.Sprintf("file %q: %v", given, err))
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, toolError(fmt.Sprintf("file %q: %v", given, errSymlink))
	case !fi.Mode().IsRegular():
		return nil, toolError(fmt.Sprintf("file %q is not a regular file", given))
	case s.sameAsProtected(fi):
		return nil, toolError(fmt.Sprintf("file %q is never sent: it is a link to one of parley's own files, whatever %s says", given, sendKey))
	case fi.Size() > maxFileSize:
		return nil, toolError(fmt.Sprintf("file %q is %d bytes, more than %d", given, fi.Size(), maxFileSize))
	}
	f, err := readable(h, p)
	if err != nil {
		return nil, toolError(fmt.Sprintf("file %q: %v", given, openErr(err)))
	}
	if rfi, err := f.Stat(); err != nil || !os.SameFile(fi, rfi) {
		f.Close()
		return nil, toolError(fmt.Sprintf("file %q changed while it was being sent; send it again", given))
	}
	return f, nil
}

// maxFiles and maxFileSize bound what one assistant message may attach.
const (
	maxFiles    = 10
	maxFileSize = 50 << 20
)

// attachments checks the files an agent wants to send and copies them
// (see above); the caller releases the copies once the message is
// appended.
func (s *Server) attachments(ctx context.Context, paths []string) ([]core.Attachment, error) {
	if len(paths) > maxFiles {
		return nil, toolError(fmt.Sprintf("at most %d files per message", maxFiles))
	}
	if len(paths) > 0 && s.opts.Files == nil {
		return nil, toolError("this parley keeps no copies of files, so it sends none")
	}
	out := make([]core.Attachment, 0, len(paths))
	for _, p := range paths {
		a, err := s.attachment(ctx, p)
		if err != nil {
			s.opts.Files.Release(out...)
			return nil, err
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return slices.Clip(out), nil
}

// pathErr is err without the path, which the message names already.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// errSymlink is why a path that held no symlink when it was resolved is
// not opened: one was put in it since.
var errSymlink = errors.New("a symlink was put in its path while it was being sent; send it again")

// openErr says why an open failed, in the words of what the agent did.
func openErr(err error) error {
	if errors.Is(err, errSymlink) {
		return errSymlink
	}
	return pathErr(err)
}
