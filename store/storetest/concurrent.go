package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// testWatermarkReader: writers on every instance (three on one database
// when the engine is shared) append while readers follow their watermarks
// on another instance: the inbox of every session by message id, one
// session's inbox, and the event log by seq. Each reader must see every
// acknowledged message exactly once and in order: a message that commits
// after a reader moved past a smaller id would be skipped for good (the
// trap of ids assigned before commit).
func testWatermarkReader(t *testing.T, e Engine) {
	ctx := context.Background()
	s, again := e.Open(t, Options{})
	stores := []Store{s}
	if e.Shared {
		stores = append(stores, again(t, Options{}), again(t, Options{}))
	}
	reader := stores[len(stores)-1]
	sessions := make([]core.SessionID, 4)
	for i := range sessions {
		sessions[i] = CreateSession(t, s, core.Session{}).ID
	}
	const writers, each = 8, 40

	done := make(chan struct{})
	// follow calls read until it returns nothing after done was closed,
	// waiting a millisecond whenever it returns nothing before.
	follow := func(read func() (int, error)) error {
		for {
			finished := false
			select {
			case <-done:
				finished = true
			default:
			}
			n, err := read()
			if err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			if finished {
				return nil
			}
			select {
			case <-done:
			case <-time.After(time.Millisecond):
			}
		}
	}
	var (
		readers                sync.WaitGroup
		all, one               []core.MessageID
		seqs                   []uint64
		evMsgs                 []core.MessageID
		allErr, oneErr, evsErr error
	)
	readers.Go(func() {
		allErr = follow(func() (int, error) {
			var after core.MessageID
			if len(all) > 0 {
				after = all[len(all)-1]
			}
			page, err := reader.Inbox(ctx, "", after, 50)
			all = append(all, IDs(page)...)
			return len(page), err
		})
	})
	readers.Go(func() {
		oneErr = follow(func() (int, error) {
			var after core.MessageID
			if len(one) > 0 {
				after = one[len(one)-1]
			}
			page, err := reader.Inbox(ctx, sessions[0], after, 50)
			one = append(one, IDs(page)...)
			return len(page), err
		})
	})
	readers.Go(func() {
		evsErr = follow(func() (int, error) {
			var after uint64
			if len(seqs) > 0 {
				after = seqs[len(seqs)-1]
			}
			evs, err := reader.EventsSince(ctx, after, 50)
			for _, ev := range evs {
				seqs = append(seqs, ev.Seq)
				if ev.Message != nil {
					evMsgs = append(evMsgs, ev.Message.ID)
				}
			}
			return len(evs), err
		})
	})

	var (
		writing sync.WaitGroup
		mu      sync.Mutex
		acked   []core.MessageID
		inOne   []core.MessageID
	)
	for i, st := range stores {
		for w := range writers {
			writing.Go(func() {
				for n := range each {
					session := sessions[(w+n)%len(sessions)]
					res, err := st.Append(ctx, core.Append{
						Message:  core.Message{Session: session, Content: "x"},
						DedupKey: fmt.Sprint(i, "/", w, "/", n),
						Events:   []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}},
					})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acked = append(acked, res.Message.ID)
					if session == sessions[0] {
						inOne = append(inOne, res.Message.ID)
					}
					mu.Unlock()
				}
			})
		}
	}
	writing.Wait()
	close(done)
	readers.Wait()
	for _, err := range []error{allErr, oneErr, evsErr} {
		if err != nil {
			t.Fatal(err)
		}
	}

	slices.Sort(acked)
	slices.Sort(inOne)
	if len(acked) != len(stores)*writers*each {
		t.Fatalf("%d appends acknowledged, want %d", len(acked), len(stores)*writers*each)
	}
	CheckIncreasing(t, all)
	if !slices.Equal(all, acked) {
		t.Errorf("the reader of every session saw %d messages, %d were acknowledged", len(all), len(acked))
	}
	CheckIncreasing(t, one)
	if !slices.Equal(one, inOne) {
		t.Errorf("the reader of one session saw %d messages, %d were acknowledged", len(one), len(inOne))
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("the event reader saw seq %d at position %d: events were skipped or repeated", seq, i)
		}
	}
	CheckIncreasing(t, evMsgs)
	if !slices.Equal(evMsgs, acked) {
		t.Errorf("the event reader saw %d messages, %d were acknowledged", len(evMsgs), len(acked))
	}
}

// testDuplicatesRace: the same platform update delivered to every instance
// at once (Slack's Socket Mode gives each connection a copy) is stored
// once; every other append returns that first message with Duplicate set,
// never an error.
func testDuplicatesRace(t *testing.T, e Engine) {
	ctx := context.Background()
	s, again := e.Open(t, Options{})
	stores := []Store{s}
	if e.Shared {
		stores = append(stores, again(t, Options{}), again(t, Options{}))
	}
	sess := CreateSession(t, s, core.Session{}).ID
	const keys, copies = 50, 4 // copies per key per instance
	type result struct {
		id  core.MessageID
		dup bool
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results = map[int][]result{}
	)
	for _, st := range stores {
		for c := range copies {
			wg.Go(func() {
				for k := range keys {
					res, err := st.Append(ctx, core.Append{
						Message:  core.Message{Session: sess, Content: fmt.Sprint(k, "/", c)},
						DedupKey: fmt.Sprint("slack\x00T1\x00", k),
						Events:   []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}},
					})
					if err != nil {
						t.Errorf("append of key %d: %v", k, err)
						return
					}
					mu.Lock()
					results[k] = append(results[k], result{res.Message.ID, res.Duplicate})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for k := range keys {
		firsts := 0
		for _, r := range results[k] {
			if !r.dup {
				firsts++
			}
			if r.id != results[k][0].id {
				t.Errorf("key %d: ids %s and %s", k, results[k][0].id, r.id)
			}
		}
		if firsts != 1 || len(results[k]) != len(stores)*copies {
			t.Errorf("key %d: %d of %d appends stored, want 1", k, firsts, len(results[k]))
		}
	}
	inbox, err := s.Inbox(ctx, sess, "", 0)
	Must(t, err)
	if len(inbox) != keys {
		t.Errorf("the inbox holds %d messages, want %d", len(inbox), keys)
	}
	if last, _ := s.LastEventSeq(ctx); last != keys {
		t.Errorf("%d events logged, want %d", last, keys)
	}
}
