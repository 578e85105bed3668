package commands_test

import (
	"slices"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

func TestTurns(t *testing.T) {
	type update struct {
		text  string
		final bool
	}
	out := func(id core.SessionID, u update) core.Command {
		return core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: id, Text: u.text, Final: u.final}
	}
	tests := []struct {
		name    string
		updates []update
		// wantYield are the events of YieldTurn; the output event's text
		// is the last update's.
		wantYield []core.EventKind
		finalText string
	}{
		{"streaming output is made final", []update{{"a", false}, {"ab", false}},
			[]core.EventKind{core.EventOutput, core.EventTurnComplete, core.EventSessionUpdated}, "ab"},
		{"final output is not repeated", []update{{"a", false}, {"done", true}},
			[]core.EventKind{core.EventTurnComplete, core.EventSessionUpdated}, ""},
		{"no output", nil, []core.EventKind{core.EventTurnComplete}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, commands.Options{})
			id := e.newSession()
			for i, u := range tt.updates {
				e.handle(out(id, u))
				evs := e.events()
				o := ofKind(evs, core.EventOutput)
				if len(o) != 1 || o[0].Turn != 0 || o[0].Text != u.text || o[0].Final != u.final {
					t.Errorf("update %d: output events %+v, want one of turn 0", i, o)
				}
				st := ofKind(evs, core.EventSessionUpdated)
				if i == 0 && (len(st) != 1 || st[0].Status != core.StatusWorking) {
					t.Errorf("first update: status events %+v, want working", st)
				}
				if i > 0 && len(st) != 0 {
					t.Errorf("update %d: status events %+v, want none", i, st)
				}
				if s := e.session(id); s.Status != core.StatusWorking || s.Output != u.text {
					t.Errorf("update %d: session %s %q, want working with the text", i, s.Status, s.Output)
				}
			}

			e.handle(core.Command{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: id})
			evs := e.events()
			if got := kinds(evs); !slices.Equal(got, tt.wantYield) {
				t.Fatalf("yield events %v, want %v", got, tt.wantYield)
			}
			for _, ev := range evs {
				switch ev.Kind {
				case core.EventOutput:
					if !ev.Final || ev.Text != tt.finalText || ev.Turn != 0 {
						t.Errorf("yield output %+v, want the final text of turn 0", ev)
					}
				case core.EventTurnComplete:
					if ev.Turn != 0 {
						t.Errorf("turn complete for turn %d, want 0", ev.Turn)
					}
				case core.EventSessionUpdated:
					if ev.Status != core.StatusIdle {
						t.Errorf("status event %s, want idle", ev.Status)
					}
				}
			}
			s := e.session(id)
			if s.Status != core.StatusIdle || s.Turn != 1 || s.Output != "" || s.OutputFinal {
				t.Errorf("after yield: %+v; want idle, turn 1, no output", s)
			}

			e.handle(out(id, update{"next turn", false}))
			if o := ofKind(e.events(), core.EventOutput); len(o) != 1 || o[0].Turn != 1 {
				t.Errorf("next turn's output %+v, want turn 1", o)
			}
		})
	}
}
