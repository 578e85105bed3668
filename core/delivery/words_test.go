package delivery_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

func TestStatusMark(t *testing.T) {
	tests := []struct {
		status core.Status
		mark   string
	}{
		{core.StatusIdle, "💬"},
		{core.StatusWorking, "⏳"},
		{core.StatusWaiting, "❓"},
		{core.StatusClosed, "✅"},
		// Anything else is no status; titles still get the idle mark.
		{"", "💬"},
		{"Idle", "💬"},
		{"open", "💬"},
	}
	for _, tt := range tests {
		if got := delivery.StatusMark(tt.status); got != tt.mark {
			t.Errorf("StatusMark(%q) = %q, want %q", tt.status, got, tt.mark)
		}
	}
}

func TestDecisionOf(t *testing.T) {
	tests := []struct {
		answer string
		want   string // "" for no decision
	}{
		// The options themselves, as buttons send them and people type them.
		{"Approve", core.DecisionApprove},
		{"Deny and continue", core.DecisionDenyContinue},
		{"Deny and abort", core.DecisionDenyAbort},
		{"approve", core.DecisionApprove},
		{"DENY AND ABORT", core.DecisionDenyAbort},
		{"  Deny and continue\n", core.DecisionDenyContinue},
		// A decision's own name.
		{"deny_continue", core.DecisionDenyContinue},
		{"deny_abort", core.DecisionDenyAbort},
		// The option's number, as platforms without buttons show them.
		{"1", core.DecisionApprove},
		{"2", core.DecisionDenyContinue},
		{" 3 ", core.DecisionDenyAbort},
		// Anything else decides nothing.
		{"", ""},
		{"0", ""},
		{"4", ""},
		{"01", ""},
		{"yes", ""},
		{"Deny", ""},
		{"Approve it", ""},
	}
	for _, tt := range tests {
		t.Run(tt.answer, func(t *testing.T) {
			got, ok := delivery.DecisionOf(delivery.ApprovalOptions, tt.answer)
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("DecisionOf(%q) = %q, %v; want %q, %v", tt.answer, got, ok, tt.want, tt.want != "")
			}
		})
	}
}

// TestApprovalOptionsMatchDecisions holds the two lists to each other:
// every option and every option's number decides its own decision.
func TestApprovalOptionsMatchDecisions(t *testing.T) {
	all := delivery.ApprovalOptionsFor(true)
	if len(all) != len(core.Decisions) || len(delivery.ApprovalOptionsFor(false)) != len(core.Decisions)-1 {
		t.Fatalf("%d options for %d decisions", len(all), len(core.Decisions))
	}
	for i, o := range all {
		for _, answer := range []string{o, fmt.Sprint(i + 1)} {
			if got, ok := delivery.DecisionOf(all, answer); !ok || got != core.Decisions[i] {
				t.Errorf("DecisionOf(%q) = %q, %v; want %q", answer, got, ok, core.Decisions[i])
			}
		}
	}
}

// TestAlwaysAllowOnlyWhereOffered: the fourth option decides only a
// question that offered it, by name, number or decision.
func TestAlwaysAllowOnlyWhereOffered(t *testing.T) {
	for _, answer := range []string{"Always allow", "always ALLOW", "4", "approve_always"} {
		if got, ok := delivery.DecisionOf(delivery.ApprovalOptionsFor(true), answer); !ok || got != core.DecisionApproveAlways {
			t.Errorf("offered: DecisionOf(%q) = %q, %v", answer, got, ok)
		}
		if got, ok := delivery.DecisionOf(delivery.ApprovalOptionsFor(false), answer); ok {
			t.Errorf("not offered: DecisionOf(%q) = %q", answer, got)
		}
	}
}

func TestUserMessage(t *testing.T) {
	closed := &core.UserError{Msg: "this session is closed", Err: fmt.Errorf("commands: session 1: %w", core.ErrSessionClosed)}
	tests := []struct {
		name   string
		err    error
		want   string
		wantOK bool
	}{
		{"nil", nil, "", false},
		{"plain error", errors.New("bolt: disk full"), delivery.GenericUserMessage, false},
		{"sentinel only", fmt.Errorf("commands: %w", core.ErrInvalid), delivery.GenericUserMessage, false},
		{"user error", closed, "this session is closed", true},
		{"wrapped user error", fmt.Errorf("telegram: handle: %w", closed), "this session is closed", true},
		{"joined", errors.Join(errors.New("other"), closed), "this session is closed", true},
		{"outermost wins", &core.UserError{Msg: "outer", Err: closed}, "outer", true},
		{"empty message counts as none", &core.UserError{Err: core.ErrInvalid}, delivery.GenericUserMessage, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := delivery.UserMessage(tt.err)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("UserMessage = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
