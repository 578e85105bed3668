package delivery

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/parley-chat/parley/core"
)

// Words for people that several packages show, kept here rather than in
// core, which holds none: the marks in front of a session's title, the
// options of an approval question (which are also answers, so the parser
// lives with them), and what an error without words for people says.

// StatusMark is the mark adapters put in front of a session's title to show
// its status; anything that is not a status gets the idle mark.
func StatusMark(s core.Status) string {
	switch s {
	case core.StatusWorking:
		return "⏳"
	case core.StatusWaiting:
		return "❓"
	case core.StatusClosed:
		return "✅"
	default:
		return "💬"
	}
}

// ApprovalOptions are the options of an approval question, in the order of
// core.Decisions: buttons where the platform has them, numbers where not.
var ApprovalOptions = []string{"Approve", "Deny and continue", "Deny and abort"}

// AlwaysAllow is the fourth option of an approval whose agent offers to
// remember it (core.DecisionApproveAlways), after ApprovalOptions.
const AlwaysAllow = "Always allow"

// ApprovalOptionsFor are the options of an approval: ApprovalOptions, and
// AlwaysAllow after them when the agent offers it.
func ApprovalOptionsFor(canAlways bool) []string {
	opts := append([]string(nil), ApprovalOptions...)
	if canAlways {
		opts = append(opts, AlwaysAllow)
	}
	return opts
}

// DecisionOf returns the decision an answer to an approval question means:
// one of its options (ApprovalOptionsFor), a decision's own name, or the
// option's number. ok is false for anything else; AlwaysAllow is a
// decision only of a question that offered it.
func DecisionOf(options []string, answer string) (decision string, ok bool) {
	a := strings.TrimSpace(answer)
	for i, o := range ApprovalOptionsFor(true) {
		if strings.EqualFold(a, o) || a == core.Decisions[i] || a == fmt.Sprint(i+1) {
			if o == AlwaysAllow && !slices.Contains(options, AlwaysAllow) {
				return "", false
			}
			return core.Decisions[i], true
		}
	}
	return "", false
}

// GenericUserMessage is what UserMessage says about an error that has no
// words for people: it says nothing of the internals, which the log has.
const GenericUserMessage = "something went wrong inside parley; its log has the details"

// UserMessage returns the message for people carried by the first
// *core.UserError in err's chain (found with errors.As), and true; for an
// error without one, or whose Msg is empty, it returns GenericUserMessage
// and false, and for nil "" and false.
func UserMessage(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var ue *core.UserError
	if errors.As(err, &ue) && ue.Msg != "" {
		return ue.Msg, true
	}
	return GenericUserMessage, false
}
