package postgres

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/follow"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// BenchmarkNotify measures how long an event takes from its commit to the
// bus subscribers that tell agents and web pages (the MCP server, the SSE
// stream): b.N durable appends of a person's message (one event each), by
// 1 and by 16 concurrent writers, each latency taken per event. Side by side:
//
//   - engine=bolt/path=bus: today's single process, the committer's
//     publish on the in-process bus;
//   - engine=bolt/path=follower: the same through store/follow, as the
//     daemon wires it on every engine (local bus, follower, cluster feed);
//   - engine=postgres/path=other-instance: appends through instance A, the
//     subscriber on instance B (two Stores, each its own pool, as two
//     processes), woken by NOTIFY; the poll (1 s) never has to;
//   - engine=postgres/path=three-instances (64 writers only): the writers
//     spread over instances A, B and C, each with its follower, the
//     subscriber on C; the latencies are those of A's and B's events.
//
// It reports the 50th and 99th percentiles from the moment Append was
// called (p50-ms, p99-ms: the commit included, an upper bound of commit to
// publish) and from the moment it returned (p50-ack-ms, p99-ack-ms: a lower
// bound; on PostgreSQL the other instance may publish before the committer
// has its answer, counted as 0). Run with -benchtime=2000x or more for a
// meaningful p99.
func BenchmarkNotify(b *testing.B) {
	cases := []struct {
		name    string
		writers []int
		rig     func(b *testing.B) notifyRig
	}{
		{"engine=bolt/path=bus", []int{1, 16}, boltBusRig},
		{"engine=bolt/path=follower", []int{1, 16}, boltFollowerRig},
		{"engine=postgres/path=other-instance", []int{1, 16}, postgresRig},
		{"engine=postgres/path=three-instances", []int{64}, threeInstancesRig},
	}
	for _, c := range cases {
		for _, writers := range c.writers {
			b.Run(fmt.Sprintf("%s/writers=%d", c.name, writers), func(b *testing.B) {
				benchNotify(b, c.rig(b), writers)
			})
		}
	}
}

// notifyRig is where a benchmark appends and what it listens to: writer w
// appends through targets[w%len(targets)].
type notifyRig struct {
	targets []target
	feed    *core.Subscription
}

// target is an instance the writers append through.
type target struct {
	s       core.Store
	local   core.Bus // the instance's local bus: its appends publish there
	measure bool     // its events' latencies count
}

func boltBusRig(b *testing.B) notifyRig {
	s := openBolt(b)
	last, _ := s.LastEventSeq(context.Background())
	bus := core.NewMemBus(last + 1)
	sub, cancel := bus.Subscribe(1<<16, false)
	b.Cleanup(cancel)
	return notifyRig{targets: []target{{s, bus, true}}, feed: sub}
}

func boltFollowerRig(b *testing.B) notifyRig {
	s := openBolt(b)
	local, sub := runFollower(b, s)
	return notifyRig{targets: []target{{s, local, true}}, feed: sub}
}

func postgresRig(b *testing.B) notifyRig {
	srv := pgtest.StartDurable(b)
	a, other := openBench(b, srv.URL), openBench(b, srv.URL)
	_, sub := runFollower(b, other)
	return notifyRig{targets: []target{{a, core.NewUnorderedMemBus(), true}}, feed: sub}
}

func threeInstancesRig(b *testing.B) notifyRig {
	srv := pgtest.StartDurable(b)
	var rig notifyRig
	for i := range 3 {
		s := openBench(b, srv.URL)
		local, sub := runFollower(b, s)
		rig.targets = append(rig.targets, target{s, local, i < 2})
		rig.feed = sub // C's
	}
	return rig
}

func openBench(b *testing.B, url string) *Store {
	s, err := Open(context.Background(), url, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func openBolt(b *testing.B) *bolt.Store {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "parley.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// runFollower runs the daemon's follower on s, its local bus and its
// cluster feed, until the benchmark ends; it returns once it listens.
func runFollower(b *testing.B, s interface {
	follow.Log
	follow.Listener
}) (local *core.MemBus, feed *core.Subscription) {
	ctx := context.Background()
	last, err := s.LastEventSeq(ctx)
	if err != nil {
		b.Fatal(err)
	}
	local, cluster := core.NewUnorderedMemBus(), core.NewMemBus(last+1)
	feed, cancelFeed := cluster.Subscribe(1<<16, false)
	ln := &signalListener{Listener: s, ready: make(chan struct{})}
	f := follow.New(s, cluster, follow.Options{After: last, Local: local, Listener: ln})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(rctx) }()
	b.Cleanup(func() { cancel(); <-done; cancelFeed() })
	<-ln.ready
	return local, feed
}

func benchNotify(b *testing.B, rig notifyRig, writers int) {
	ctx := context.Background()
	sessions := make([]core.SessionID, 16)
	for i := range sessions {
		t := rig.targets[0]
		sess, evs, err := t.s.CreateSession(ctx, core.Session{Title: fmt.Sprint("session ", i)}, core.Event{Kind: core.EventSessionCreated})
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			t.local.Publish(e)
		}
		sessions[i] = sess.ID
	}
	for range sessions {
		select {
		case <-rig.feed.C:
		case <-time.After(10 * time.Second):
			b.Fatal("the sessions' events did not come")
		}
	}

	var mu sync.Mutex
	called, acked, got := map[uint64]time.Time{}, map[uint64]time.Time{}, map[uint64]time.Time{}
	all := make(chan struct{})
	go func() {
		for {
			select {
			case e := <-rig.feed.C:
				now := time.Now()
				mu.Lock()
				got[e.Seq] = now
				n := len(got)
				mu.Unlock()
				if n == b.N {
					close(all)
					return
				}
			case <-time.After(30 * time.Second):
				return
			}
		}
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range writers {
		t := rig.targets[w%len(rig.targets)]
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				start := time.Now()
				res, err := t.s.Append(ctx, core.Append{
					Message: core.Message{Session: sessions[i%int64(len(sessions))], Role: core.RoleUser,
						Actor: core.Actor{ID: "12345", Name: "Ada"}, Origin: "telegram", Mime: core.MimeMarkdown, Content: "hello there"},
					DedupKey: "telegram/" + strconv.FormatInt(i, 10),
					Events:   []core.Event{{Kind: core.EventHumanMessage, Origin: "telegram", Message: &core.Message{}}},
				})
				end := time.Now()
				if err != nil {
					b.Error(err)
					return
				}
				if t.measure {
					mu.Lock()
					for _, e := range res.Events {
						called[e.Seq], acked[e.Seq] = start, end
					}
					mu.Unlock()
				}
				for _, e := range res.Events {
					t.local.Publish(e)
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		b.Fatalf("the subscriber got %d of %d events", len(got), b.N)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	var fromCall, fromAck []time.Duration
	for seq, t := range got {
		if c, ok := called[seq]; ok {
			fromCall = append(fromCall, t.Sub(c))
			fromAck = append(fromAck, max(0, t.Sub(acked[seq])))
		}
	}
	if len(fromCall) == 0 {
		return // a probe run (b.N = 1) whose append was not measured
	}
	for name, d := range map[string][]time.Duration{"": fromCall, "-ack": fromAck} {
		slices.Sort(d)
		b.ReportMetric(ms(d[len(d)/2]), "p50"+name+"-ms")
		b.ReportMetric(ms(d[len(d)*99/100]), "p99"+name+"-ms")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
