package bolt

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// appendPart appends s prefixed with its length, so that concatenated parts
// split one way only whatever bytes they contain.
func appendPart(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// placeKey is the places bucket key of a binding.
func placeKey(adapter core.AdapterName, p core.Place) []byte {
	b := make([]byte, 0, 3+len(adapter)+len(p.Chat)+len(p.Thread))
	b = appendPart(b, string(adapter))
	b = appendPart(b, p.Chat)
	return appendPart(b, p.Thread)
}

// ledgerKey is the ledger bucket key of a platform message.
func ledgerKey(r core.MessageRef) []byte {
	b := make([]byte, 0, 4+len(r.Adapter)+len(r.Place.Chat)+len(r.Place.Thread)+len(r.ID))
	b = appendPart(b, string(r.Adapter))
	b = appendPart(b, r.Place.Chat)
	b = appendPart(b, r.Place.Thread)
	return appendPart(b, r.ID)
}

// sessionPrefix is the inbox_by_session prefix of a session's messages.
func sessionPrefix(id core.SessionID) []byte {
	return appendPart(make([]byte, 0, 1+len(id)+26), string(id))
}

// checkKey reports a key bbolt would refuse, before the write is queued: a
// write function that fails makes its whole group run again.
func checkKey(what string, k []byte) error {
	if len(k) > bbolt.MaxKeySize {
		return fmt.Errorf("%s is %d bytes, longer than %d", what, len(k), bbolt.MaxKeySize)
	}
	return nil
}

// idState is the last message id as its time and entropy.
type idState struct {
	ms      uint64
	entropy [10]byte
}

func (st idState) bytes() []byte {
	b := make([]byte, 16)
	b[0], b[1], b[2], b[3], b[4], b[5] =
		byte(st.ms>>40), byte(st.ms>>32), byte(st.ms>>24), byte(st.ms>>16), byte(st.ms>>8), byte(st.ms)
	copy(b[6:], st.entropy[:])
	return b
}

// nextID returns a message id greater than every id this store made before.
// It runs inside the write transaction, so ids increase in commit order.
// The time part is max(now, last id's time): a clock that went backwards
// keeps the last millisecond and increments its entropy.
func (w *wtx) nextID(now time.Time) (core.MessageID, error) {
	if !w.idsLoaded {
		if v := w.Bucket(bucketMeta).Get(keyLastID); v != nil {
			if len(v) != 16 {
				return "", errors.New("corrupt last message id in meta")
			}
			w.ids.ms = uint64(v[0])<<40 | uint64(v[1])<<32 | uint64(v[2])<<24 |
				uint64(v[3])<<16 | uint64(v[4])<<8 | uint64(v[5])
			copy(w.ids.entropy[:], v[6:])
		}
		w.idsLoaded = true
	}
	st := &w.ids
	if ms := uint64(max(now.UnixMilli(), 0)); ms > st.ms {
		st.ms = ms
		fresh(&st.entropy)
	} else if !increment(&st.entropy) {
		// 2^79 ids in one millisecond cannot happen, but if it did the
		// next millisecond keeps the order.
		st.ms++
		fresh(&st.entropy)
	}
	w.idsDirty = true
	return core.MessageID(core.EncodeID(st.ms, st.entropy)), nil
}

// fresh fills e with random bytes, leaving the top bit clear so that many
// increments fit before the entropy would wrap.
func fresh(e *[10]byte) {
	_, _ = rand.Read(e[:]) // never fails since Go 1.24
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
