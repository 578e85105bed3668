package postgres

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/parley-chat/parley/core"
)

// What a record looks like stored: the same JSON as store/bolt writes, so
// that a data directory copies into a database value for value.

// idState is the last message id as its time and entropy.
type idState struct {
	ms      uint64
	entropy [10]byte
}

func (st *idState) parse(b []byte) error {
	if len(b) == 0 {
		*st = idState{}
		return nil
	}
	if len(b) != 16 {
		return errors.New("corrupt last message id in counters")
	}
	st.ms = uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
	copy(st.entropy[:], b[6:])
	return nil
}

func (st idState) bytes() []byte {
	if st == (idState{}) {
		return []byte{}
	}
	b := make([]byte, 16)
	b[0], b[1], b[2], b[3], b[4], b[5] =
		byte(st.ms>>40), byte(st.ms>>32), byte(st.ms>>24), byte(st.ms>>16), byte(st.ms>>8), byte(st.ms)
	copy(b[6:], st.entropy[:])
	return b
}

// next returns a message id greater than every id made before, from the
// counters row the group holds locked: the time part is max(now, the last
// id's), and the same millisecond increments the last entropy. A clock that
// went backwards, on this instance or another, keeps the order.
func (st *idState) next(now time.Time) core.MessageID {
	if ms := uint64(max(now.UnixMilli(), 0)); ms > st.ms {
		st.ms = ms
		fresh(&st.entropy)
	} else if !increment(&st.entropy) {
		st.ms++
		fresh(&st.entropy)
	}
	return core.MessageID(core.EncodeID(st.ms, st.entropy))
}

// fresh fills e with random bytes, leaving the top bit clear so that many
// increments fit before the entropy would wrap.
func fresh(e *[10]byte) {
	_, _ = rand.Read(e[:])
	e[0] &= 0x7f
}

// increment adds one to e and reports false when it wrapped to zero.
func increment(e *[10]byte) bool {
	for i := len(e) - 1; i >= 0; i-- {
		e[i]++
		if e[i] != 0 {
			return true
		}
	}
	return false
}

// decodeEvent reads a stored event, with the message it references (id and
// JSON) when it has one.
func decodeEvent(seq int64, data, msgID, msgData []byte) (core.Event, error) {
	var e core.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return e, fmt.Errorf("event %d: %w", seq, err)
	}
	e.Seq = uint64(seq)
	if msgID != nil {
		if msgData == nil {
			return e, fmt.Errorf("event %d: message %s is missing", seq, msgID)
		}
		m, err := decodeMessage(msgID, msgData)
		if err != nil {
			return e, fmt.Errorf("event %d: %w", seq, err)
		}
		e.Message = &m
	}
	return e, nil
}

// ledgerRow is a cleanup row encoded outside the transaction.
type ledgerRow struct {
	key     []byte // the Ref's parts, each prefixed with its length: the tie-break of Cleanup's order
	ref     core.MessageRef
	session core.SessionID
	created time.Time
	val     []byte
}

// prepareCleanup fills defaults (Session session when empty, Created now
// when zero) and encodes the rows. A row must name a platform message.
func prepareCleanup(now time.Time, session core.SessionID, rows []core.CleanupEntry) ([]ledgerRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]ledgerRow, len(rows))
	for i, r := range rows {
		if r.Ref.ID == "" {
			return nil, fmt.Errorf("cleanup row %d has no message id", i)
		}
		if r.Session == "" {
			r.Session = session
		}
		if r.Created.IsZero() {
			r.Created = now
		}
		val, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("cleanup row %d: %w", i, err)
		}
		out[i] = ledgerRow{key: ledgerKey(r.Ref), ref: r.Ref, session: r.Session, created: r.Created, val: val}
	}
	return out, nil
}

// ledgerKey is store/bolt's key of a ledger row: its parts prefixed with
// their lengths, so that rows of equal Created list in the same order.
func ledgerKey(r core.MessageRef) []byte {
	var b []byte
	for _, s := range []string{string(r.Adapter), r.Place.Chat, r.Place.Thread, r.ID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// encodeSession finishes a session that a caller's function changed from
// its stored bytes: the id stays, and when anything changed Updated moves to
// now unless the function set it. It returns nil when there is nothing to
// write. Its errors are the caller's: it writes nothing.
func encodeSession(id core.SessionID, cur *core.Session, stored []byte, updated, now time.Time) ([]byte, error) {
	cur.ID = id
	val, err := json.Marshal(cur)
	if err != nil || bytes.Equal(val, stored) {
		return nil, err
	}
	if cur.Updated.Equal(updated) {
		cur.Updated = now
		return json.Marshal(cur)
	}
	return val, nil
}

func decodeSession(raw []byte) (core.Session, error) {
	var s core.Session
	if err := json.Unmarshal(raw, &s); err != nil {
		return core.Session{}, err
	}
	return s, nil
}

// decodeMessage reads a stored message, whose id is its key.
func decodeMessage(id, v []byte) (core.Message, error) {
	var m core.Message
	if err := json.Unmarshal(v, &m); err != nil {
		return core.Message{}, fmt.Errorf("message %s: %w", id, err)
	}
	m.ID = core.MessageID(id)
	return m, nil
}

// cloneSession copies s so the copy shares no map with it.
func cloneSession(s core.Session) core.Session {
	s.Bindings = maps.Clone(s.Bindings)
	return s
}
