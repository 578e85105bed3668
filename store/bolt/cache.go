package bolt

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/parley-chat/parley/core"
)

// sessionCache keeps, per session, the stored JSON last seen and what it
// decodes to. Every Append returns its session; decoding that JSON was the
// largest part of an append's cost outside the committer. An entry is used
// only when its bytes equal the stored bytes, so it can never be stale: a
// miss decodes and replaces it. Entries are immutable once stored and handed
// out as clones.
type sessionCache struct {
	mu sync.RWMutex
	m  map[core.SessionID]*cachedSession
}

type cachedSession struct {
	raw  []byte
	sess core.Session
}

// match returns the entry for id if it was decoded from exactly raw. raw may
// be bbolt's memory: it is only compared.
func (c *sessionCache) match(id core.SessionID, raw []byte) *cachedSession {
	c.mu.RLock()
	e := c.m[id]
	c.mu.RUnlock()
	if e != nil && bytes.Equal(e.raw, raw) {
		return e
	}
	return nil
}

// put remembers that raw, owned by the cache from now on, decodes to sess.
func (c *sessionCache) put(id core.SessionID, raw []byte, sess core.Session) {
	e := &cachedSession{raw: raw, sess: cloneSession(sess)}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[core.SessionID]*cachedSession)
	}
	c.m[id] = e
	c.mu.Unlock()
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
