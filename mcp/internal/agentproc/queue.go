package agentproc

import "sync"

// Queue holds what an agent reported until its consumer takes it, so the
// reader of the agent's output never waits for the consumer: the output
// is read on (an interrupt's acknowledgement, a prompt's end) while nobody
// reads events. Its methods are safe for concurrent use.
type Queue[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
	ready  chan struct{} // a token when items or closed changed
}

// NewQueue returns an empty queue.
func NewQueue[T any]() *Queue[T] { return &Queue[T]{ready: make(chan struct{}, 1)} }

// Push adds items at the end.
func (q *Queue[T]) Push(items ...T) {
	if len(items) == 0 {
		return
	}
	q.mu.Lock()
	q.items = append(q.items, items...)
	q.mu.Unlock()
	q.wake()
}

// Close says no more items will come; those queued can still be taken.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *Queue[T]) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the queued items, or waits for some; closed is true when
// no more will come.
func (q *Queue[T]) take() (items []T, closed bool) {
	for {
		q.mu.Lock()
		items, closed = q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		if len(items) > 0 || closed {
			return items, closed
		}
		<-q.ready
	}
}

// Forward hands the items to out in order until the queue is closed and
// empty, or stop is closed (the rest are dropped); then it closes out.
func (q *Queue[T]) Forward(out chan<- T, stop <-chan struct{}) {
	defer close(out)
	for {
		items, closed := q.take()
		for _, it := range items {
			select {
			case out <- it:
			case <-stop:
				return
			}
		}
		if closed && len(items) == 0 {
			return
		}
	}
}
