package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// keyPlaceholders in meta records that the sessions stored before parley
// kept a session's placeholder title as a value (core.Session.Placeholder)
// were given theirs (markPlaceholders).
var keyPlaceholders = []byte("placeholders")

// markPlaceholders gives the sessions stored before core.Session.Placeholder
// existed the placeholder parley then recognised by its shape: a title
// "Session Jan 2 15:04" naming a minute within legacySkew of the session's
// creation (the minute read by the adapter's clock or the service's). It
// runs once per file, at Open, and needs no new schema version: the field
// is one more JSON member, which an older parley ignores (it still
// recognises placeholders by their shape). Sessions an older parley writes
// after the file was marked lose their placeholder value, and so keep a
// placeholder title past the first message, the one cost of going back and
// forth between versions. Only titles of that shape are decoded, so the
// pass costs a scan of the sessions bucket.
func markPlaceholders(tx *bbolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keyPlaceholders) != nil {
		return nil
	}
	b := tx.Bucket(bucketSessions)
	type marked struct {
		id  []byte
		val []byte
	}
	var pending []marked
	err := b.ForEach(func(k, v []byte) error {
		if !bytes.Contains(v, []byte(`"title":"`+legacyPrefix)) {
			return nil
		}
		var sess core.Session
		if err := json.Unmarshal(v, &sess); err != nil {
			return fmt.Errorf("session %s: %w", k, err)
		}
		if sess.Placeholder != "" || !legacyPlaceholder(sess.Title, sess.Created) {
			return nil
		}
		sess.Placeholder = sess.Title
		val, err := json.Marshal(sess)
		if err != nil {
			return fmt.Errorf("session %s: %w", k, err)
		}
		// Written after the walk: bbolt does not allow changing a
		// bucket while ForEach walks it.
		pending = append(pending, marked{id: bytes.Clone(k), val: val})
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark placeholder titles: %w", err)
	}
	for _, m := range pending {
		if err := b.Put(m.id, m.val); err != nil {
			return fmt.Errorf("mark placeholder titles: %w", err)
		}
	}
	return meta.Put(keyPlaceholders, []byte("1"))
}

// The placeholder's shape as parley recognised it before it was stored as a
// value: frozen here, for the records of that time only.
const (
	legacyPrefix = "Session "
	legacyLayout = "Jan 2 15:04"
	legacySkew   = 2 * time.Minute
)

// legacyPlaceholder reports whether title is the placeholder given to a
// session created at created, by the rule parley used before: the exact
// shape, and a minute within legacySkew of the creation's.
func legacyPlaceholder(title string, created time.Time) bool {
	rest, ok := strings.CutPrefix(title, legacyPrefix)
	if !ok {
		return false
	}
	t, err := time.Parse(legacyLayout, rest)
	if err != nil || t.Format(legacyLayout) != rest {
		return false
	}
	c := created.UTC()
	// The placeholder has no year: put it in the creation's year, or the
	// neighbouring one across New Year's Eve.
	for _, y := range []int{c.Year(), c.Year() - 1, c.Year() + 1} {
		at := time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
		if d := at.Sub(c.Truncate(time.Minute)); d >= -legacySkew && d <= legacySkew {
			return true
		}
	}
	return false
}
