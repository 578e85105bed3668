package core

// Authorizer knows the allow-lists (commands.Service implements it). The
// Handler refuses unauthorized commands itself; an adapter asks its
// Authorizer before it acts on a person's input outside a Command —
// creating a forum topic, downloading a file, answering /help — so that
// people not on the list are ignored silently there too.
//
// Every chat adapter is given its Authorizer explicitly when it is built
// and refuses to be built without one: found by asserting the Handler, a
// wrapper around the Handler would silently drop the check.
type Authorizer interface {
	// Authorized reports whether actor may give commands from origin. It
	// does not block.
	Authorized(origin Origin, actor Actor) bool
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(origin Origin, actor Actor) bool

// Authorized implements Authorizer.
func (f AuthorizerFunc) Authorized(origin Origin, actor Actor) bool { return f(origin, actor) }
