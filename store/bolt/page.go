package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// SessionsPage implements core.Store. The sessions bucket is keyed by the
// time-ordered session id, so the newest sessions are its last keys: a page
// is a backwards walk from the cursor, decoding only the sessions it
// returns. A status filter reads each skipped session's status alone (the
// third field of its JSON) without decoding the rest, so a filter that
// matches little costs a scan of short reads rather than a page. The
// cursor is the id of the page's last session; "" when nothing older
// matches.
//
// Streaming skips, without decoding, every session whose JSON has no
// top-level output (it is omitted when empty), which is nearly all of them.
//
// Unlike Session and Append, a page does not go through the session cache:
// paging through every session would otherwise leave every session decoded
// in memory.
func (s *Store) SessionsPage(ctx context.Context, q core.SessionQuery) ([]core.Session, core.SessionID, error) {
	var (
		out  []core.Session
		next core.SessionID
	)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketSessions).Cursor()
		var k, v []byte
		if q.After == "" {
			k, v = c.Last()
		} else {
			// Seek lands on After or the first key past it; either way
			// the page starts at the key before.
			if k, _ = c.Seek([]byte(q.After)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		for ; k != nil; k, v = c.Prev() {
			// Output is omitted when empty, and the bytes "output":"
			// cannot occur inside a JSON string (its quotes are escaped):
			// without them there is no top-level Output to check.
			if q.Streaming && !bytes.Contains(v, []byte(`"output":"`)) {
				continue
			}
			if q.Status != "" {
				st, err := storedStatus(v)
				if err != nil {
					return fmt.Errorf("session %s: %w", k, err)
				}
				if st != q.Status {
					continue
				}
			}
			var (
				sess    core.Session
				decoded bool
			)
			if q.Streaming {
				var err error
				if sess, err = s.decodeUncached(core.SessionID(k), v); err != nil {
					return fmt.Errorf("session %s: %w", k, err)
				}
				if sess.Output == "" || sess.OutputFinal {
					// A binding's adapter metadata may hold the
					// same bytes: decoded, but not listed.
					continue
				}
				decoded = true
			}
			if q.Limit > 0 && len(out) == q.Limit {
				// One more matches: there is a next page.
				next = out[len(out)-1].ID
				return nil
			}
			if !decoded {
				var err error
				if sess, err = s.decodeUncached(core.SessionID(k), v); err != nil {
					return fmt.Errorf("session %s: %w", k, err)
				}
			}
			out = append(out, sess)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("bolt: sessions page: %w", err)
	}
	return out, next, nil
}

// decodeUncached decodes a stored session, from the cache when it holds
// exactly these bytes, without adding to it.
func (s *Store) decodeUncached(id core.SessionID, raw []byte) (core.Session, error) {
	if e := s.cache.match(id, raw); e != nil {
		return cloneSession(e.sess), nil
	}
	var sess core.Session
	if err := json.Unmarshal(raw, &sess); err != nil {
		return core.Session{}, err
	}
	return sess, nil
}

// storedStatus reads the "status" member of a stored session's JSON object,
// stopping there: the members before it (id, title) are short, the ones
// after it (output, questions, bindings) may be long. Sessions are stored
// as json.Marshal writes core.Session, id, title and status first; that
// layout is read directly (a filter over 10,000 sessions took 38 ms through
// a json.Decoder, 437,000 allocations), anything else through the decoder.
func storedStatus(raw []byte) (core.Status, error) {
	if st, ok := leadingStatus(raw); ok {
		return st, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", errors.New("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", err
		}
		if t == "status" {
			var st core.Status
			err := dec.Decode(&st)
			return st, err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", err
		}
	}
	return "", nil // no status: matches no filter
}

// leadingStatus reads the status of a session stored as
// {"id":"…","title":"…","status":"…",…}, or reports false when raw does not
// start that way.
func leadingStatus(raw []byte) (core.Status, bool) {
	rest, ok := bytes.CutPrefix(raw, []byte(`{"id":`))
	if !ok {
		return "", false
	}
	if rest, ok = skipString(rest); !ok {
		return "", false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"title":`)); !ok {
		return "", false
	}
	if rest, ok = skipString(rest); !ok {
		return "", false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"status":"`)); !ok {
		return "", false
	}
	// Statuses are plain lower-case words: anything escaped is left to the
	// decoder.
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", false
	}
	return core.Status(rest[:end]), true
}

// skipString skips the JSON string at the start of b and returns what
// follows it.
func skipString(b []byte) ([]byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, false
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte; \uXXXX's digits are plain bytes
		case '"':
			return b[i+1:], true
		}
	}
	return nil, false
}
