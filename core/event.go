package core

import "time"

// EventKind names what happened.
type EventKind string

// Event kinds.
const (
	EventSessionCreated EventKind = "session_created"
	EventSessionUpdated EventKind = "session_updated" // title or status changed
	EventHumanMessage   EventKind = "human_message"   // a person's input is in the inbox
	EventQueued         EventKind = "queued"          // input arrived while the agent was busy
	EventAssistant      EventKind = "assistant_message"
	EventOutput         EventKind = "output"        // the live output changed
	EventTurnComplete   EventKind = "turn_complete" // the agent yielded its turn
	EventNotice         EventKind = "notice"
	EventQuestion       EventKind = "question"
	EventAnswer         EventKind = "answer"
	EventCancel         EventKind = "cancel"
	EventToolActivity   EventKind = "tool_activity" // an agent tool call started or ended
	// EventQuestionClosed: a question was withdrawn unanswered (its ui.ask
	// timed out or was cancelled); Text says why, Refs where it was shown.
	EventQuestionClosed EventKind = "question_closed"
	// EventResync says that events up to its Seq were missed (a follower
	// of the event log fell behind its bounded front): readers re-read
	// from the store what they derive from events. It has no session and
	// is not in the log; the next event on the bus is Seq+1.
	EventResync EventKind = "resync"
)

// Event is something that happened in a session, published on the Bus after
// it was stored. Seq is assigned by the store's event log and increases by
// one per event; SSE clients resume from it.
type Event struct {
	Seq     uint64    `json:"seq"`
	Kind    EventKind `json:"kind"`
	Session SessionID `json:"session_id"`
	Time    time.Time `json:"ts"`
	Origin  Origin    `json:"origin,omitempty"`

	// Message is set for human, assistant, notice, question and answer
	// events (for questions and answers, Content holds the question or the
	// chosen answer).
	Message *Message `json:"message,omitempty"`
	// Text is the live output for EventOutput.
	Text string `json:"text,omitempty"`
	// Turn is the session's turn an output event belongs to.
	Turn uint64 `json:"turn,omitempty"`
	// Final marks the last output of a turn.
	Final bool `json:"final,omitempty"`
	// Status and Title describe the session after EventSessionUpdated and
	// EventSessionCreated.
	Status Status `json:"status,omitempty"`
	Title  string `json:"title,omitempty"`
	// QuestionID and Options belong to question and answer events.
	QuestionID string   `json:"question_id,omitempty"`
	Options    []string `json:"options,omitempty"`
	// Tool describes EventToolActivity.
	Tool *ToolActivity `json:"tool,omitempty"`
	// Call describes EventToolCall, EventToolOutput and EventToolApproval.
	Call *ToolCall `json:"call,omitempty"`
	// Lifetime is the cleanup lifetime of what this event makes adapters
	// send (notices); zero means the kind's default.
	Lifetime Lifetime `json:"lifetime,omitempty"`
	// SourceOnly events (notices, transcriptions) go to their origin
	// adapter only and are dropped when the origin is not a UI adapter.
	SourceOnly bool `json:"source_only,omitempty"`
	// Refs are the platform messages that show the question of an
	// EventQuestionClosed, to be edited so that nobody clicks on it.
	Refs []MessageRef `json:"refs,omitempty"`
	// Place addresses a notice to a place of the origin adapter where no
	// session lives (Session is then empty): an answer to /help in a
	// forum's General topic.
	Place *Place `json:"place,omitempty"`
}

// ToolActivity is one agent tool call, shown grouped in the UI.
type ToolActivity struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"` // "running", "ok", "error"
	Detail string `json:"detail,omitempty"`
}

// Human reports whether the event carries a person's new input, which is
// what agents are notified of (never of their own output).
func (e Event) Human() bool {
	return e.Kind == EventHumanMessage || e.Kind == EventAnswer || e.Kind == EventCancel
}

// Journaled reports whether the store journals e for delivery in the same
// transaction that logs it: what cannot be derived from state again once
// lost (assistant messages and their files, notices, questions, the
// turn-done message, and a final output's continuation messages or file).
// A streaming output's latest text, titles and statuses, and due deletions
// are derived from the session and the cleanup ledger at start-up instead.
// People's input copied to other platforms is not journaled: the inbox
// holds it, and the copy is a courtesy.
func (e Event) Journaled() bool {
	switch e.Kind {
	case EventAssistant, EventNotice, EventCancel, EventQuestion, EventTurnComplete, EventQuestionClosed:
		return true
	case EventOutput:
		return e.Final
	}
	return false
}
