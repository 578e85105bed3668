package core_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// decodeID takes an id apart into the 48-bit millisecond timestamp and the
// 80 bits of entropy it encodes, independently of EncodeID's own loop, so
// that the layout is checked rather than restated.
func decodeID(t *testing.T, id string) (ms uint64, entropy [10]byte) {
	t.Helper()
	if len(id) != 26 {
		t.Fatalf("id %q has %d characters, want 26", id, len(id))
	}
	var bits [130]byte // 26 digits × 5 bits; the first 2 bits are padding
	for i := 0; i < 26; i++ {
		v := strings.IndexByte(crockford, id[i])
		if v < 0 {
			t.Fatalf("id %q has %q, not a Crockford base32 digit", id, id[i])
		}
		for j := 0; j < 5; j++ {
			bits[i*5+j] = byte(v>>(4-j)) & 1
		}
	}
	if bits[0] != 0 || bits[1] != 0 {
		t.Fatalf("id %q does not fit in 128 bits", id)
	}
	for i := 0; i < 48; i++ {
		ms = ms<<1 | uint64(bits[2+i])
	}
	for i := 0; i < 80; i++ {
		entropy[i/8] |= bits[2+48+i] << (7 - i%8)
	}
	return ms, entropy
}

func TestEncodeID(t *testing.T) {
	ff := [10]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	tests := []struct {
		name    string
		ms      uint64
		entropy [10]byte
		want    string // "" checks only that it decodes back
	}{
		{"zero", 0, [10]byte{}, "00000000000000000000000000"},
		{"largest", 1<<48 - 1, ff, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"},
		// The ULID specification's example timestamp.
		{"ulid example time", 1469922850259, [10]byte{}, "01ARZ3NDEK0000000000000000"},
		{"entropy low bit", 0, [10]byte{9: 1}, "00000000000000000000000001"},
		{"timestamp low bit", 1, [10]byte{}, "00000000010000000000000000"},
		{"mixed", 1_764_158_400_123, [10]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x0f, 0xed}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := core.EncodeID(tt.ms, tt.entropy)
			if tt.want != "" && got != tt.want {
				t.Errorf("EncodeID = %q, want %q", got, tt.want)
			}
			ms, entropy := decodeID(t, got)
			if ms != tt.ms || entropy != tt.entropy {
				t.Errorf("EncodeID = %q decodes to %d, %x; want %d, %x", got, ms, entropy, tt.ms, tt.entropy)
			}
			if !core.ValidID(got) {
				t.Errorf("ValidID(%q) = false for an id EncodeID made", got)
			}
		})
	}
}

// TestEncodeIDOrder holds the promise that makes ids useful as sort keys:
// comparing two ids as strings compares their times first, then their
// entropy as a big-endian number.
func TestEncodeIDOrder(t *testing.T) {
	ff := [10]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	tests := []struct {
		name       string
		ms1, ms2   uint64
		ent1, ent2 [10]byte
	}{
		{"later millisecond beats any entropy", 1000, 1001, ff, [10]byte{}},
		{"across a digit boundary", 31, 32, [10]byte{}, [10]byte{}},
		{"across a byte of the timestamp", 0xff, 0x100, ff, [10]byte{}},
		{"same millisecond, higher last byte", 5, 5, [10]byte{9: 1}, [10]byte{9: 2}},
		{"same millisecond, carry into an earlier byte", 5, 5, [10]byte{8: 0, 9: 0xff}, [10]byte{8: 1, 9: 0}},
		{"same millisecond, first byte", 5, 5, [10]byte{0: 0x7f, 9: 0xff}, [10]byte{0: 0x80}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := core.EncodeID(tt.ms1, tt.ent1), core.EncodeID(tt.ms2, tt.ent2)
			if a >= b {
				t.Errorf("EncodeID(%d, %x) = %q is not before EncodeID(%d, %x) = %q", tt.ms1, tt.ent1, a, tt.ms2, tt.ent2, b)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"made by EncodeID", core.EncodeID(1_764_158_400_123, [10]byte{1, 2, 3}), true},
		{"zero", "00000000000000000000000000", true},
		{"largest", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", true},
		{"empty", "", false},
		{"one short", "0000000000000000000000000", false},
		{"one long", "000000000000000000000000000", false},
		{"more than 128 bits", "80000000000000000000000000", false},
		{"letter I is not Crockford", "0000000000000000000000000I", false},
		{"letter L is not Crockford", "0000000000000000000000000L", false},
		{"letter O is not Crockford", "0000000000000000000000000O", false},
		{"letter U is not Crockford", "0000000000000000000000000U", false},
		{"lower case", "01arz3ndek0000000000000000", false},
		{"punctuation", "0000000000000000000000000-", false},
		{"multi-byte character", "000000000000000000000000é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := core.ValidID(tt.in); got != tt.want {
				t.Errorf("ValidID(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestNewSessionIDCarriesItsTime(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 123_456, time.UTC) // sub-millisecond parts are dropped
	for name, id := range map[string]core.SessionID{
		"NewSessionID":   core.NewSessionID(now),
		"SessionIDs.New": new(core.SessionIDs).New(now),
	} {
		if !core.ValidID(string(id)) {
			t.Fatalf("%s = %q, not a valid id", name, id)
		}
		ms, entropy := decodeID(t, string(id))
		if int64(ms) != now.UnixMilli() {
			t.Errorf("%s(%v) carries millisecond %d, want %d", name, now, ms, now.UnixMilli())
		}
		// The first id of a millisecond leaves room to count up within it.
		if entropy[0]&0x80 != 0 {
			t.Errorf("%s: first id of a millisecond has entropy %x with the top bit set", name, entropy)
		}
	}
}

func TestSessionIDsMonotonic(t *testing.T) {
	var ids core.SessionIDs
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		at   []time.Duration // offsets from base, in call order
	}{
		{"same millisecond", []time.Duration{0, 0, 0, 0, 0, 0, 0, 0}},
		{"same millisecond, different nanoseconds", []time.Duration{1, 2, 999_999, 3}},
		{"milliseconds advancing", []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Second}},
		// A clock stepping back (NTP) must not make a later session sort
		// first: the id stays in the last millisecond and counts up.
		{"clock stepping back", []time.Duration{2 * time.Second, time.Second, 0, -time.Hour}},
	}
	var prev core.SessionID
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range tt.at {
				id := ids.New(base.Add(d))
				if id <= prev {
					t.Fatalf("New(base%+v) = %q, not after the previous %q", d, id, prev)
				}
				prev = id
			}
		})
		// Each case starts later than the last one ended.
		base = base.Add(10 * time.Second)
	}
}

// Two generators are two clocks: one that ran ahead (a test's fake clock, a
// synctest bubble's) does not carry its time into the other's ids, which
// is what the process-wide generator did, so that a session made on one
// clock could carry another's time and its reservation outlive the
// retention (IDMillis).
func TestSessionIDsKeepTheirOwnClock(t *testing.T) {
	wall := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ahead := wall.Add(48 * time.Hour)
	var fake, own core.SessionIDs
	fake.New(ahead)
	id := own.New(wall)
	if ms, _ := decodeID(t, string(id)); int64(ms) != wall.UnixMilli() {
		t.Errorf("an id of %v carries %v after another generator made one of %v", wall, time.UnixMilli(int64(ms)).UTC(), ahead)
	}
	if id := core.NewSessionID(wall); id >= fake.New(ahead) {
		t.Errorf("NewSessionID(%v) = %q, not before an id of %v", wall, id, ahead)
	}
	if ms, _ := decodeID(t, string(core.NewSessionID(wall))); int64(ms) != wall.UnixMilli() {
		t.Errorf("NewSessionID(%v) carries %v after an id of %v", wall, time.UnixMilli(int64(ms)).UTC(), ahead)
	}
}

func TestSessionIDsConcurrent(t *testing.T) {
	var gen core.SessionIDs
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	const goroutines, each = 8, 200
	ids := make([][]core.SessionID, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				ids[g] = append(ids[g], gen.New(now))
			}
		})
	}
	wg.Wait()
	var all []core.SessionID
	for g, own := range ids {
		// Each caller sees its own ids increase.
		if !slices.IsSorted(own) {
			t.Errorf("goroutine %d got ids out of order", g)
		}
		all = append(all, own...)
	}
	slices.Sort(all)
	if n := len(slices.Compact(all)); n != goroutines*each {
		t.Errorf("%d distinct ids from %d calls in one millisecond", n, goroutines*each)
	}
	for _, id := range all {
		if ms, _ := decodeID(t, string(id)); int64(ms) != now.UnixMilli() {
			t.Fatalf("id %q carries millisecond %d, want %d", id, ms, now.UnixMilli())
		}
	}
}

// NewSessionID keeps no order, but its ids are distinct.
func TestNewSessionIDDistinct(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	seen := map[core.SessionID]bool{}
	for range 1000 {
		id := core.NewSessionID(now)
		if seen[id] {
			t.Fatalf("NewSessionID made %q twice", id)
		}
		seen[id] = true
	}
}

func TestOrigin(t *testing.T) {
	tests := []struct {
		origin core.Origin
		ui     bool
	}{
		{core.OriginNone, false},
		{core.OriginAPI, false},
		{core.OriginHook, false},
		{core.OriginMCP, false},
		{core.OriginSystem, false},
		{"telegram", true},
		{"slack", true},
		{"matrix", true},
		{"web", true},
	}
	for _, tt := range tests {
		t.Run(string(tt.origin), func(t *testing.T) {
			if got := tt.origin.IsUI(); got != tt.ui {
				t.Errorf("Origin(%q).IsUI() = %v, want %v", tt.origin, got, tt.ui)
			}
			// An adapter's input has the adapter's name as its origin.
			if got := tt.origin.Adapter(); string(got) != string(tt.origin) {
				t.Errorf("Origin(%q).Adapter() = %q", tt.origin, got)
			}
		})
	}
}
