package delivery

import (
	"github.com/parley-chat/parley/core"
)

// Router decides which adapters an event goes to. It holds no state beyond
// the set of registered UI adapters and is safe for concurrent use.
//
// The rules, in order:
//   - Source-only events (notices, transcriptions) go to their origin
//     adapter only, and nowhere when the origin is not a registered UI
//     adapter.
//   - Session title and status changes go to every adapter the session
//     already has a binding on (each shows the title).
//   - A person's input from a UI adapter is already on that platform; it is
//     reflected to the session's other adapters only when Reflect is set.
//     Input with no UI origin (API, hook, MCP) is shown everywhere.
//   - Everything else (assistant messages, output, questions, turn
//     completion) goes to the session's LastInputOrigin when that is a
//     registered UI adapter the session can reach; otherwise it is broadcast
//     to every adapter the session can reach.
//
// A session can reach an adapter when it has a binding there or the adapter
// is a Binder, which creates the binding lazily on first delivery.
//
// An adapter that follows events itself (Capabilities.FollowsEvents, the
// web page) is a target like any other: routing a reply to it keeps the
// reply off the other platforms. The Dispatcher then makes no operations
// for it.
type Router struct {
	adapters map[core.AdapterName]core.Adapter
	order    []core.AdapterName
	// Reflect copies a person's input to the session's other platforms.
	Reflect bool
}

// NewRouter returns a router over the given UI adapters.
func NewRouter(adapters ...core.Adapter) *Router {
	r := &Router{adapters: map[core.AdapterName]core.Adapter{}}
	for _, a := range adapters {
		if _, dup := r.adapters[a.Name()]; dup {
			continue
		}
		r.adapters[a.Name()] = a
		r.order = append(r.order, a.Name())
	}
	return r
}

// Adapter returns a registered adapter by name.
func (r *Router) Adapter(name core.AdapterName) (core.Adapter, bool) {
	a, ok := r.adapters[name]
	return a, ok
}

// Adapters returns the registered adapters in registration order.
func (r *Router) Adapters() []core.Adapter {
	out := make([]core.Adapter, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.adapters[n])
	}
	return out
}

// Reaches reports whether session s can be delivered to on adapter name.
func (r *Router) Reaches(s core.Session, name core.AdapterName) bool {
	a, ok := r.adapters[name]
	if !ok {
		return false
	}
	if _, bound := s.Bindings[name]; bound {
		return true
	}
	_, binder := a.(core.Binder)
	return binder
}

// Targets returns the adapters event e of session s goes to, in
// registration order.
func (r *Router) Targets(s core.Session, e core.Event) []core.AdapterName {
	if e.SourceOnly {
		if e.Origin.IsUI() && r.Reaches(s, e.Origin.Adapter()) {
			return []core.AdapterName{e.Origin.Adapter()}
		}
		return nil
	}
	switch e.Kind {
	case core.EventSessionCreated, core.EventSessionUpdated:
		return r.filter(func(n core.AdapterName) bool { _, ok := s.Bindings[n]; return ok && r.adapters[n] != nil })
	case core.EventQueued:
		return nil // the same message's EventHumanMessage is routed
	case core.EventHumanMessage, core.EventAnswer:
		if !e.Origin.IsUI() {
			return r.broadcast(s)
		}
		if !r.Reflect {
			return nil
		}
		return r.filter(func(n core.AdapterName) bool { return n != e.Origin.Adapter() && r.Reaches(s, n) })
	}
	if o := s.LastInputOrigin; o.IsUI() && r.Reaches(s, o.Adapter()) {
		return []core.AdapterName{o.Adapter()}
	}
	return r.broadcast(s)
}

func (r *Router) broadcast(s core.Session) []core.AdapterName {
	return r.filter(func(n core.AdapterName) bool { return r.Reaches(s, n) })
}

func (r *Router) filter(keep func(core.AdapterName) bool) []core.AdapterName {
	var out []core.AdapterName
	for _, n := range r.order {
		if keep(n) {
			out = append(out, n)
		}
	}
	return out
}
