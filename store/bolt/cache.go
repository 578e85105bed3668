package bolt

import (
	"bytes"
	"container/list"
	"encoding/json"
	"sync"

	"github.com/parley-chat/parley/core"
)

// sessionCacheSize bounds the session cache: the sessions in use (people
// writing, agents streaming) are a few hundred at most, and an entry is
// about a kilobyte, so the cache stays under a few MiB however many sessions
// the file holds. Unbounded, it kept every session ever touched: 30 MiB of
// the 320 MiB heap after 100,000 sessions were created.
const sessionCacheSize = 4096

// sessionCache keeps, per session, the stored JSON last seen and what it
// decodes to, for the sessionCacheSize sessions used most recently. Every
// Append returns its session; decoding that JSON was the largest part of an
// append's cost outside the committer. An entry is used only when its bytes
// equal the stored bytes, so it can never be stale: a miss decodes and
// replaces it. Entries are immutable once stored and handed out as clones.
type sessionCache struct {
	mu  sync.Mutex
	max int // zero means sessionCacheSize
	m   map[core.SessionID]*list.Element
	lru list.List // of *cachedSession, most recently used first
}

type cachedSession struct {
	id   core.SessionID
	raw  []byte
	sess core.Session
}

// match returns the entry for id if it was decoded from exactly raw. raw may
// be bbolt's memory: it is only compared.
func (c *sessionCache) match(id core.SessionID, raw []byte) *cachedSession {
	c.mu.Lock()
	var e *cachedSession
	if el := c.m[id]; el != nil {
		e = el.Value.(*cachedSession)
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	if e != nil && bytes.Equal(e.raw, raw) {
		return e
	}
	return nil
}

// put remembers that raw, owned by the cache from now on, decodes to sess,
// and forgets the least recently used session past the bound.
func (c *sessionCache) put(id core.SessionID, raw []byte, sess core.Session) {
	e := &cachedSession{id: id, raw: raw, sess: cloneSession(sess)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[core.SessionID]*list.Element)
	}
	if el := c.m[id]; el != nil {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.m[id] = c.lru.PushFront(e)
	limit := c.max
	if limit <= 0 {
		limit = sessionCacheSize
	}
	for c.lru.Len() > limit {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.m, old.Value.(*cachedSession).id)
	}
}

// len is the number of sessions cached.
func (c *sessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// decode returns a private copy of the session stored as raw, from the cache
// when it matches. raw may be bbolt's memory: a miss copies it before
// caching.
func (c *sessionCache) decode(id core.SessionID, raw []byte) (core.Session, error) {
	if e := c.match(id, raw); e != nil {
		return cloneSession(e.sess), nil
	}
	var sess core.Session
	if err := json.Unmarshal(raw, &sess); err != nil {
		return core.Session{}, err
	}
	c.put(id, bytes.Clone(raw), sess)
	return sess, nil
}
