package core

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"sync"
	"time"
)

// SessionID identifies a session. It is time-ordered (26 characters of
// Crockford base32, like a ULID) so listing sessions by id lists them by
// creation time.
type SessionID string

// MessageID identifies an inbox message. The store assigns it; ids are
// monotonic across the whole store, so a single watermark ("everything after
// id X") works for one session and for all of them. Callers treat ids as
// opaque strings and only compare them.
type MessageID string

// AdapterName names a platform adapter ("telegram", "slack", "matrix", "web").
// Adapter names double as the origins of input that came through them.
type AdapterName string

// Origin says where a command or message came from: the name of a UI adapter
// for input a person typed on a platform, or one of the non-UI origins below.
type Origin string

// The non-UI origins. Events from these have no human on a platform to reply
// to, so the Router broadcasts their output to every bound UI adapter.
const (
	OriginNone   Origin = ""
	OriginAPI    Origin = "api"
	OriginHook   Origin = "hook"
	OriginMCP    Origin = "mcp"
	OriginSystem Origin = "system"
)

// IsUI reports whether o is a UI adapter's origin, that is, anything but the
// non-UI origins. Only UI origins become a session's LastInputOrigin.
func (o Origin) IsUI() bool {
	switch o {
	case OriginNone, OriginAPI, OriginHook, OriginMCP, OriginSystem:
		return false
	}
	return true
}

// Adapter returns the adapter name of a UI origin.
func (o Origin) Adapter() AdapterName { return AdapterName(o) }

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// EncodeID encodes a 48-bit millisecond timestamp and 80 bits of entropy as
// a 26-character, lexicographically time-ordered string (the ULID layout).
func EncodeID(ms uint64, entropy [10]byte) string {
	var b [16]byte
	b[0] = byte(ms >> 40)
	b[1] = byte(ms >> 32)
	b[2] = byte(ms >> 24)
	b[3] = byte(ms >> 16)
	b[4] = byte(ms >> 8)
	b[5] = byte(ms)
	copy(b[6:], entropy[:])
	// 128 bits as 26 base32 digits: the first digit carries the top 3 bits.
	var out [26]byte
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// SessionIDs makes time-ordered session ids from the readings of one
// clock. Ids it makes in the same millisecond increase monotonically, and a
// clock that steps back (NTP) does not make a later session sort first: the
// id keeps the last millisecond and counts up.
//
// That state belongs to the clock, so whoever owns a clock keeps its own
// SessionIDs (commands.Service, each store) rather than one shared by the
// process: a shared one would carry one clock's time into the ids another
// makes — a test's fake clock, or a synctest bubble's, running ahead or
// behind the real one — and an id's time is what decides when its
// reservation is pruned (IDMillis).
//
// The zero value is ready to use. It is safe for concurrent use.
type SessionIDs struct {
	mu      sync.Mutex
	lastMS  uint64
	entropy [10]byte
}

// New returns a new session id of now, after every id g made before.
func (g *SessionIDs) New(now time.Time) SessionID {
	ms := uint64(max(now.UnixMilli(), 0))
	g.mu.Lock()
	defer g.mu.Unlock()
	if ms <= g.lastMS {
		ms = g.lastMS
		incr(&g.entropy)
	} else {
		g.lastMS = ms
		freshEntropy(&g.entropy)
	}
	return SessionID(EncodeID(ms, g.entropy))
}

// NewSessionID returns a session id of now with fresh entropy, for an id
// made on its own (a tool, a test). It keeps no state, so ids it makes in
// the same millisecond come in no particular order; code that makes ids
// one after another keeps a SessionIDs.
func NewSessionID(now time.Time) SessionID {
	var e [10]byte
	freshEntropy(&e)
	return SessionID(EncodeID(uint64(max(now.UnixMilli(), 0)), e))
}

// freshEntropy fills e with random bytes, leaving the top bit clear so that
// many increments fit before it would wrap.
func freshEntropy(e *[10]byte) {
	_, _ = rand.Read(e[:]) // never fails since Go 1.24
	e[0] &= 0x7f
}

func incr(e *[10]byte) {
	for i := len(e) - 1; i >= 0; i-- {
		e[i]++
		if e[i] != 0 {
			return
		}
	}
}

// IDMillis returns the millisecond time an id made by EncodeID carries (its
// first ten digits are two zero bits and the 48-bit time), or false when s
// is not such an id. The stores prune dedup keys and reservations by it.
func IDMillis(s string) (int64, bool) {
	if !ValidID(s) {
		return 0, false
	}
	var ms uint64
	for i := 0; i < 10; i++ {
		ms = ms<<5 | uint64(strings.IndexByte(crockford, s[i]))
	}
	return int64(ms), true
}

// ValidID reports whether s looks like an id made by EncodeID. It lets the
// API reject a malformed watermark with a clear error instead of treating it
// as "from the beginning".
func ValidID(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(crockford, rune(s[i])) {
			return false
		}
	}
	return true
}
