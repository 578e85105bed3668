package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// nameLayout is the time in a backup's name, in UTC.
const nameLayout = "20060102T150405Z"

// Name is the name of a backup taken at t: parley-YYYYMMDDTHHMMSSZ.db.
func Name(t time.Time) string { return "parley-" + t.UTC().Format(nameLayout) + ".db" }

// parseName returns the time a backup's name says, and whether it is one.
func parseName(name string) (time.Time, bool) {
	const prefix, suffix = "parley-", ".db"
	if len(name) != len(prefix)+len(nameLayout)+len(suffix) || name[:len(prefix)] != prefix || name[len(name)-len(suffix):] != suffix {
		return time.Time{}, false
	}
	t, err := time.Parse(nameLayout, name[len(prefix):len(name)-len(suffix)])
	return t, err == nil
}

// Entry is a backup in a directory.
type Entry struct {
	// Path is the file.
	Path string
	// Time is when it was taken, from its name.
	Time time.Time
}

// List returns the backups in dir, the files named as Name names them,
// oldest first. A directory that does not exist holds none.
func List(dir string) ([]Entry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backup: list %s: %w", dir, err)
	}
	var out []Entry
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if t, ok := parseName(e.Name()); ok {
			out = append(out, Entry{Path: filepath.Join(dir, e.Name()), Time: t})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// Newest returns the newest backup taken no later than now, and whether
// there is one. Backups named with a later time (a clock that was wrong)
// are not counted.
func Newest(list []Entry, now time.Time) (Entry, bool) {
	for i := len(list) - 1; i >= 0; i-- {
		if !list[i].Time.After(now) {
			return list[i], true
		}
	}
	return Entry{}, false
}

// Prune deletes the oldest backups in dir beyond the newest keep, and
// returns the files it deleted.
func Prune(dir string, keep int) ([]string, error) {
	list, err := List(dir)
	if err != nil || len(list) <= keep {
		return nil, err
	}
	var gone []string
	var errs []error
	for _, e := range list[:len(list)-keep] {
		if err := os.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, e.Path)
	}
	if err := errors.Join(errs...); err != nil {
		return gone, fmt.Errorf("backup: prune %s: %w", dir, err)
	}
	return gone, nil
}
