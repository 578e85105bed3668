package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
)

// fakeLog is an event log in memory with a trimmed front, like both stores'.
type fakeLog struct {
	mu      sync.Mutex
	evs     []core.Event // Seqs first..last, dense
	first   uint64       // oldest kept
	last    uint64
	reads   int
	err     error         // returned by every read while set
	lastErr error         // returned by LastEventSeq while set
	hold    chan struct{} // while set, a read waits for it to be closed
}

func newLog() *fakeLog { return &fakeLog{first: 1} }

// commit appends n events and returns them, as a committer's Append would.
func (l *fakeLog) commit(n int) []core.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []core.Event
	for range n {
		l.last++
		e := core.Event{Seq: l.last, Kind: core.EventHumanMessage, Session: "s", Text: fmt.Sprint("event ", l.last)}
		l.evs = append(l.evs, e)
		out = append(out, e)
	}
	return out
}

// trim drops the events before from.
func (l *fakeLog) trim(from uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = l.evs[from-l.first:]
	l.first = from
}

func (l *fakeLog) setErr(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *fakeLog) readCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads
}

func (l *fakeLog) EventsSince(_ context.Context, after uint64, limit int) ([]core.Event, error) {
	l.mu.Lock()
	l.reads++
	if hold := l.hold; hold != nil {
		l.mu.Unlock()
		<-hold
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	if after >= l.last {
		return nil, nil
	}
	if after+1 < l.first {
		return nil, fmt.Errorf("after %d, oldest kept is %d: %w", after, l.first, core.ErrEventsTruncated)
	}
	out := l.evs[after+1-l.first:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return slices.Clone(out), nil
}

func (l *fakeLog) LastEventSeq(context.Context) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	if l.lastErr != nil {
		return 0, l.lastErr
	}
	return l.last, nil
}

// received is an event as a subscriber of the cluster feed got it, and
// when (on the bubble's clock, since the follower started).
type received struct {
	seq  uint64
	kind core.EventKind
	at   time.Duration
}

// feed runs a follower of log in the current bubble and records what its
// bus delivers. stop ends it and returns what Run returned.
type feed struct {
	f     *Follower
	start time.Time
	mu    sync.Mutex
	got   []received
	stop  func() error
}

func follow(t *testing.T, log Log, opts Options) *feed {
	t.Helper()
	bus := core.NewMemBus(opts.After + 1)
	sub, cancelSub := bus.Subscribe(1<<16, false)
	fd := &feed{f: New(log, bus, opts), start: time.Now()}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fd.f.Run(ctx) }()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		core.Consume(ctx, sub, func(_ context.Context, e core.Event) {
			fd.mu.Lock()
			fd.got = append(fd.got, received{e.Seq, e.Kind, time.Since(fd.start)})
			fd.mu.Unlock()
		})
	}()
	fd.stop = sync.OnceValue(func() error {
		cancel()
		err := <-done
		<-consumed
		cancelSub()
		return err
	})
	t.Cleanup(func() { _ = fd.stop() })
	return fd
}

func (fd *feed) events() []received {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	return slices.Clone(fd.got)
}

func (fd *feed) seqs() []uint64 {
	var out []uint64
	for _, r := range fd.events() {
		out = append(out, r.seq)
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// Without hints the log is read at start and then once a Poll after the
// previous read: an event committed 300 ms after a read is published
// exactly 1 s after that read.
func TestPollsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		fd := follow(t, log, Options{})
		synctest.Wait()
		if n := log.readCount(); n != 1 {
			t.Fatalf("%d reads at start, want 1", n)
		}
		time.Sleep(300 * time.Millisecond)
		log.commit(1)
		time.Sleep(700*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		if got := fd.events(); len(got) != 0 {
			t.Fatalf("published before the poll: %+v", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := fd.events(); len(got) != 1 || got[0].seq != 1 || got[0].at != time.Second {
			t.Fatalf("published %+v, want seq 1 at 1s", got)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := log.readCount(); n != 7 {
			t.Errorf("%d reads after 6 s, want 7 (one a second and the first)", n)
		}
	})
}

// A hint wakes the follower at once; hints given while it reads coalesce
// into one more read, and a hint for a Seq already published reads
// nothing. A read puts the next poll a full interval off.
func TestHintsWakeAndCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		fd := follow(t, log, Options{Poll: 10 * time.Second})
		synctest.Wait()
		time.Sleep(4 * time.Second)
		log.commit(3)
		hold := make(chan struct{})
		log.mu.Lock()
		log.hold = hold
		log.mu.Unlock()
		fd.f.Hint(3)
		synctest.Wait() // reading, held
		for range 10 {
			fd.f.Hint(3)
		}
		log.mu.Lock()
		log.hold = nil
		log.mu.Unlock()
		close(hold)
		synctest.Wait()
		if n := log.readCount(); n != 3 {
			t.Errorf("%d reads after a hint and ten more during its read, want 3 (the first and two)", n)
		}
		if got := fd.seqs(); !slices.Equal(got, []uint64{1, 2, 3}) {
			t.Fatalf("published %v, want 1 2 3", got)
		}
		if at := fd.events()[0].at; at != 4*time.Second {
			t.Errorf("published at %v, want at the hint (4s)", at)
		}
		fd.f.Hint(2)
		fd.f.Hint(3)
		synctest.Wait()
		if n := log.readCount(); n != 3 {
			t.Errorf("%d reads after hints of published seqs, want 3", n)
		}
		fd.f.Hint(0) // unknown seq: read
		synctest.Wait()
		if n := log.readCount(); n != 4 {
			t.Errorf("%d reads after hint(0), want 4", n)
		}
		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		if n := log.readCount(); n != 4 {
			t.Errorf("%d reads before the poll, want 4", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := log.readCount(); n != 5 {
			t.Errorf("%d reads at the poll 10 s after the last read, want 5", n)
		}
	})
}

// A follower that starts behind reads the log in batches, in order, until
// a batch comes back short.
func TestCatchesUpInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		log.commit(1000)
		fd := follow(t, log, Options{After: 100, Batch: 64})
		synctest.Wait()
		if got := fd.seqs(); !slices.Equal(got, seqRange(101, 1000)) {
			t.Fatalf("published %d events (%v…), want 101..1000 in order", len(got), got[:min(len(got), 5)])
		}
		// 900 events: 14 full batches of 64 and one of 4.
		if n := log.readCount(); n != 15 {
			t.Errorf("%d reads, want 15", n)
		}
		if fd.f.Position() != 1000 {
			t.Errorf("Position = %d, want 1000", fd.f.Position())
		}
	})
}

// Events of this instance come on the local bus; the next one is published
// as it is, without a read. One beyond the next (other instances committed
// in between) makes the follower read the log, and the local copies of what
// it read are not published again. Every event is published once, in order.
func TestLocalEventsOnceAndInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		local := core.NewUnorderedMemBus()
		fd := follow(t, log, Options{Local: local, Poll: time.Hour})
		synctest.Wait()
		reads := log.readCount()
		for _, e := range log.commit(3) { // ours
			local.Publish(e)
		}
		synctest.Wait()
		if n := log.readCount(); n != reads {
			t.Errorf("%d reads for the next local events, want none", n-reads)
		}
		log.commit(2) // another instance's, not hinted
		mine := log.commit(2)
		local.Publish(mine[1]) // the local publishes race: 7 before 6
		local.Publish(mine[0])
		synctest.Wait()
		if n := log.readCount(); n != reads+1 {
			t.Errorf("%d reads for a local event past a gap, want 1", n-reads)
		}
		for _, e := range mine {
			local.Publish(e) // late repeats
		}
		log.commit(1) // another instance's: read at the hint
		fd.f.Hint(8)
		synctest.Wait()
		if got := fd.seqs(); !slices.Equal(got, seqRange(1, 8)) {
			t.Fatalf("published %v, want 1..8 once each", got)
		}
	})
}

// Local events dropped by the lossy subscription (a burst larger than its
// buffer while the follower was held up) are read from the log once the
// feed is drained, without waiting for a poll.
func TestDroppedLocalEventsAreRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		local := core.NewUnorderedMemBus()
		bus := core.NewMemBus(1)
		sub, cancelSub := bus.Subscribe(1, false) // full after one: holds the follower
		defer cancelSub()
		f := New(log, bus, Options{Local: local, Poll: time.Hour})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { _ = f.Run(ctx) }()
		synctest.Wait()
		start := time.Now()
		// The follower takes two (one in sub's buffer, one blocked), the
		// local buffer holds its size, the last 50 are dropped.
		evs := log.commit(DefaultLocalBuffer + 52)
		for _, e := range evs {
			local.Publish(e)
		}
		for want := uint64(1); want <= uint64(len(evs)); want++ {
			if e := <-sub.C; e.Seq != want {
				t.Fatalf("got seq %d, want %d", e.Seq, want)
			}
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the dropped events came after %v, at a poll", waited)
		}
		if n := log.readCount(); n != 2 {
			t.Errorf("%d reads, want 2 (the first and one for the drops)", n)
		}
	})
}

// A follower whose position was trimmed off the log publishes one resync
// carrying the newest Seq, then follows on from it; the bus goes on past
// the gap.
func TestTruncatedLogResyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		log.commit(5)
		var out bytes.Buffer
		fd := follow(t, log, Options{Logger: slog.New(slog.NewTextHandler(&out, nil))})
		synctest.Wait()
		if got := fd.seqs(); !slices.Equal(got, seqRange(1, 5)) {
			t.Fatalf("published %v", got)
		}
		log.setErr(errors.New("connection refused"))
		log.commit(100)
		log.trim(50)
		time.Sleep(time.Second)
		synctest.Wait()
		log.setErr(nil)
		fd.f.Hint(105)
		synctest.Wait()
		log.commit(2)
		fd.f.Hint(107)
		synctest.Wait()
		got := fd.events()
		want := []received{{105, core.EventResync, time.Second}, {106, core.EventHumanMessage, time.Second}, {107, core.EventHumanMessage, time.Second}}
		if len(got) != 8 || !slices.Equal(got[5:], want) {
			t.Fatalf("published %+v, want 1..5, then %+v", got, want)
		}
		if !bytes.Contains(out.Bytes(), []byte("fell behind the event log")) ||
			bytes.Count(out.Bytes(), []byte("cannot read the event log")) != 1 {
			t.Errorf("log:\n%s", out.String())
		}
	})
}

// A failing store publishes nothing and moves nothing; the follower reads
// again at the next poll, logs the outage once and its end once.
func TestFailingStoreIsReadAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		var out bytes.Buffer
		fd := follow(t, log, Options{Logger: slog.New(slog.NewTextHandler(&out, nil))})
		synctest.Wait()
		log.setErr(errors.New("connection refused"))
		log.commit(2)
		fd.f.Hint(2)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := fd.seqs(); len(got) != 0 || fd.f.Position() != 0 {
			t.Fatalf("published %v at position %d while failing", got, fd.f.Position())
		}
		if n := log.readCount(); n != 5 {
			t.Errorf("%d reads, want 5 (start, hint, three polls)", n)
		}
		log.setErr(nil)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := fd.seqs(); !slices.Equal(got, []uint64{1, 2}) {
			t.Fatalf("published %v after recovery", got)
		}
		if bytes.Count(out.Bytes(), []byte("cannot read the event log")) != 1 ||
			bytes.Count(out.Bytes(), []byte("reading the event log again")) != 1 {
			t.Errorf("log:\n%s", out.String())
		}
	})
}

// fakeListener hears what its commits send, and fails on demand.
type fakeListener struct {
	mu      sync.Mutex
	hint    func(uint64)
	calls   []time.Duration // when Listen was called, since start
	start   time.Time
	failFor int // the next failFor calls fail at once
	stop    chan error
}

func (l *fakeListener) Listen(ctx context.Context, hint func(uint64)) error {
	l.mu.Lock()
	l.calls = append(l.calls, time.Since(l.start))
	if l.failFor > 0 {
		l.failFor--
		l.mu.Unlock()
		return errors.New("dial: connection refused")
	}
	l.hint = hint
	l.mu.Unlock()
	hint(0)
	select {
	case <-ctx.Done():
		return nil
	case err := <-l.stop:
		l.mu.Lock()
		l.hint = nil
		l.mu.Unlock()
		return err
	}
}

func (l *fakeListener) notify(seq uint64) {
	l.mu.Lock()
	h := l.hint
	l.mu.Unlock()
	if h != nil {
		h(seq)
	}
}

func (l *fakeListener) callTimes() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// The listener's hints wake the follower; a listener that fails is called
// again after 100 ms, doubling while it fails at once, and the follower
// reads at each failure, since a commit may have gone unheard.
func TestListenerHintsAndRelistens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		ln := &fakeListener{start: time.Now(), stop: make(chan error)}
		fd := follow(t, log, Options{Listener: ln, Poll: time.Hour})
		synctest.Wait()
		log.commit(1)
		ln.notify(1)
		synctest.Wait()
		if got := fd.seqs(); !slices.Equal(got, []uint64{1}) {
			t.Fatalf("published %v after a notification", got)
		}
		reads := log.readCount()
		ln.mu.Lock()
		ln.failFor = 3
		ln.mu.Unlock()
		time.Sleep(time.Second)
		log.commit(1) // unheard: the connection is going
		ln.stop <- errors.New("connection reset")
		synctest.Wait()
		if got := fd.seqs(); !slices.Equal(got, []uint64{1, 2}) {
			t.Fatalf("published %v after the listener stopped", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		want := []time.Duration{0, 1100 * time.Millisecond, 1300 * time.Millisecond, 1700 * time.Millisecond, 2500 * time.Millisecond}
		if got := ln.callTimes(); !slices.Equal(got, want) {
			t.Errorf("Listen called at %v, want %v", got, want)
		}
		if n := log.readCount() - reads; n != 5 {
			t.Errorf("%d reads through the outage, want 5 (one per failure and the new listen's)", n)
		}
	})
}

// Run ends with its context, and returns nil.
func TestRunEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fd := follow(t, newLog(), Options{Listener: &fakeListener{start: time.Now(), stop: make(chan error)}})
		synctest.Wait()
		if err := fd.stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

// A resync that cannot learn the newest Seq publishes nothing and reads no
// more until the next poll, which resyncs.
func TestResyncWaitsForTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newLog()
		fd := follow(t, log, Options{})
		synctest.Wait()
		log.commit(10)
		log.trim(5)
		log.mu.Lock()
		log.lastErr = errors.New("connection refused")
		log.mu.Unlock()
		fd.f.Hint(10)
		synctest.Wait()
		if n := log.readCount(); n != 2 {
			t.Errorf("%d reads, want 2 (the first, the hint's)", n)
		}
		if got := fd.events(); len(got) != 0 {
			t.Fatalf("published %+v", got)
		}
		log.mu.Lock()
		log.lastErr = nil
		log.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := fd.events(); !slices.Equal(got, []received{{10, core.EventResync, time.Second}}) {
			t.Fatalf("published %+v, want the resync at 10 at the poll", got)
		}
	})
}
