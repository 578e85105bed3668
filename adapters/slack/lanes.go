package slack

import "sync"

// lanes run work in order per key (a conversation) and concurrently across
// keys, so one conversation's slow envelope (a file being fetched) holds up
// neither the acknowledgements of the others nor its own order. A lane's
// goroutine exists only while it has work.
type lanes struct {
	mu sync.Mutex
	// queued holds, per busy key, the work waiting behind the running one.
	queued map[string][]func()
	wg     sync.WaitGroup
}

// submit runs f after the work already submitted under key.
func (l *lanes) submit(key string, f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queued == nil {
		l.queued = map[string][]func(){}
	}
	if q, busy := l.queued[key]; busy {
		l.queued[key] = append(q, f)
		return
	}
	l.queued[key] = nil
	l.wg.Add(1)
	go l.drain(key, f)
}

func (l *lanes) drain(key string, f func()) {
	defer l.wg.Done()
	for {
		f()
		l.mu.Lock()
		q := l.queued[key]
		if len(q) == 0 {
			delete(l.queued, key)
			l.mu.Unlock()
			return
		}
		f, l.queued[key] = q[0], q[1:]
		l.mu.Unlock()
	}
}

// wait blocks until every lane is idle.
func (l *lanes) wait() { l.wg.Wait() }

// recent is a bounded set of keys, forgetting the oldest first.
type recent struct {
	mu   sync.Mutex
	set  map[string]bool
	ring []string
	next int
}

func (r *recent) init(n int) {
	r.set = make(map[string]bool, n)
	r.ring = make([]string, n)
}

// add remembers key.
func (r *recent) add(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set[key] {
		return
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = key
	r.set[key] = true
	r.next = (r.next + 1) % len(r.ring)
}

// has reports whether key is remembered.
func (r *recent) has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.set[key]
}
