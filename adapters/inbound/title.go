package inbound

import "time"

// PlaceholderTitle is the title of a session started at now without one,
// for an adapter that must name its topic, thread or room before the
// session exists ("Session Nov 23 21:04", the minute in UTC). The command
// that creates the session carries it with core.Command.Placeholder set, so
// the session keeps it as its placeholder and the first person's message
// with text replaces it. It reads as the title core gives a session
// created without one.
func PlaceholderTitle(now time.Time) string {
	return "Session " + now.UTC().Format("Jan 2 15:04")
}
