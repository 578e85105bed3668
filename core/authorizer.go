package core

// Authorizer is an optional capability of a Handler that knows the
// allow-lists (commands.Service implements it). The Handler refuses
// unauthorized commands itself; an adapter asks the Authorizer, by type
// assertion, before it acts on a person's input outside a Command —
// creating a forum topic, downloading a file, answering /help — so that
// people not on the list are ignored silently there too.
type Authorizer interface {
	// Authorized reports whether actor may give commands from origin. It
	// does not block.
	Authorized(origin Origin, actor Actor) bool
}
