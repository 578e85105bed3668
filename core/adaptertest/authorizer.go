package adaptertest

import "github.com/parley-chat/parley/core"

// Everyone admits every person. Adapters are given their Authorizer
// explicitly (a nil one is a construction error); this is the one for an
// adapter under a test that is not about who is admitted, such as this
// suite, whose handler takes every command.
var Everyone core.Authorizer = core.AuthorizerFunc(func(core.Origin, core.Actor) bool { return true })
