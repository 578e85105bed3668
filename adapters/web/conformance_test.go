package web_test

import (
	"testing"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/core/adaptertest"
)

// The page shows sessions from their UiState, not from messages, so most
// of what the suite observes on a platform does not exist here; the Env
// says so rather than faking it. What runs: the capabilities, sends with
// usable and distinct references, edits and deletes that succeed, and Bind
// (a place per session, no metadata). What the UiState shows is tested by
// the package's own tests.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, adaptertest.Harness{InMemory: true, New: func(t *testing.T) adaptertest.Env {
		a := web.New(web.Options{})
		t.Cleanup(a.Close)
		return adaptertest.Env{
			Adapter: a,
			NoMessages: "the page renders each session from its UiState (core's reducer over the event log), " +
				"so Send, Edit and Delete are accepted and change nothing",
			Cannot: map[adaptertest.Hook]string{
				adaptertest.HookDeleteThread:  "a session's place on the page is its id, which nothing deletes",
				adaptertest.HookRateLimitNext: "parley serves the page itself: it has no rate limits and never answers 429",
			},
		}
	}})
}
