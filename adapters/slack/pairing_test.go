package slack

import (
	"context"
	"testing"

	"github.com/slack-go/slack/slackevents"

	"github.com/parley-chat/parley/core"
)

// pairing is a core.Pairer that is on or off.
type pairing bool

func (p pairing) Pairing() bool { return bool(p) }

// TestStrangerPairsOnlyWhenPairingIsOn: a direct message from someone not
// on the allow-list becomes a core.Pair only when the adapter was given a
// Pairer that pairs; in a channel, or without one, it is dropped
// silently.
func TestStrangerPairsOnlyWhenPairingIsOn(t *testing.T) {
	dm := &slackevents.MessageEvent{Type: "message", User: "U2", Text: "hello", Channel: "D9", ChannelType: slackevents.ChannelTypeIM, TimeStamp: "1700000000.000100"}
	inChannel := &slackevents.MessageEvent{Type: "message", User: "U2", Text: "hello", Channel: "C1", ChannelType: "channel", TimeStamp: "1700000000.000200"}
	for _, tc := range []struct {
		name   string
		pairer core.Pairer
		m      *slackevents.MessageEvent
		pairs  bool
	}{
		{"dm, pairing on", pairing(true), dm, true},
		{"dm, pairing off", pairing(false), dm, false},
		{"dm, no pairer", nil, dm, false},
		{"channel, pairing on", pairing(true), inChannel, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder("U1")
			a := newTestAdapter(t, nil, withAuthorizer(rec), func(o *Options) { o.Pairer = tc.pairer })
			if err := a.onMessage(context.Background(), rec, tc.m); err != nil {
				t.Fatal(err)
			}
			cmds := rec.commands()
			switch {
			case !tc.pairs && len(cmds) != 0:
				t.Fatalf("a stranger's message made commands: %+v", cmds)
			case tc.pairs && (len(cmds) != 1 || cmds[0].Kind != core.Pair || cmds[0].Actor.ID != "U2" || cmds[0].Place.Chat != "D9"):
				t.Fatalf("commands %+v, want one core.Pair from U2 in D9", cmds)
			}
		})
	}
}
