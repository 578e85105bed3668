package core

import (
	"encoding/json"
	"time"
)

// Status is where a session's conversation stands. Adapters show it as an
// emoji in the topic, thread or room title.
type Status string

// Session statuses.
const (
	StatusIdle    Status = "idle"    // waiting for the person
	StatusWorking Status = "working" // the agent is on its turn
	StatusWaiting Status = "waiting" // the agent asked a question (ui.ask)
	StatusClosed  Status = "closed"  // closed; input is refused
)

// Valid reports whether s is one of the session statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusIdle, StatusWorking, StatusWaiting, StatusClosed:
		return true
	}
	return false
}

// Session is one conversation between people and an agent. It may be
// reachable from several platforms at once, one Binding per adapter.
type Session struct {
	ID      SessionID `json:"id"`
	Title   string    `json:"title"`
	Status  Status    `json:"status"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Placeholder is the title the session was given because nobody
	// chose one ("Session Nov 23 21:04"), or empty when its title was
	// chosen. While Title still is the placeholder, the first person's
	// message with text names the session; a rename or that first
	// message makes Title differ, and the placeholder stays behind only
	// as a record of it.
	Placeholder string `json:"placeholder,omitempty"`
	// LastInputOrigin is the UI origin a person last wrote from; replies
	// go there. Empty until a person writes from a UI adapter.
	LastInputOrigin Origin `json:"last_input_origin,omitempty"`
	// Turn counts the agent's completed turns; output updates carry the
	// turn they belong to.
	Turn uint64 `json:"turn"`
	// Output is the live output of the current turn, as the agent last
	// replaced it.
	Output string `json:"output,omitempty"`
	// OutputFinal is true once the current turn's output was marked final.
	OutputFinal bool `json:"output_final,omitempty"`
	// Questions are the open questions (ui.ask) awaiting an answer.
	Questions []Question `json:"questions,omitempty"`
	// Tools are the newest tool calls the agent's runtime reported.
	Tools []ToolState `json:"tools,omitempty"`
	// Bindings holds where the session lives on each adapter, created
	// lazily on first delivery or when input arrives from that adapter.
	Bindings map[AdapterName]Binding `json:"bindings,omitempty"`
	// Agent names the agent parley runs the session with (SetAgent),
	// empty for the default one.
	Agent string `json:"agent,omitempty"`
}

// DefaultAgent is what people call the default agent, whose sessions have
// an empty Session.Agent: "/agent default" switches back to it.
const DefaultAgent = "default"

// ControlAgent is the first word of the control message (MimeControl) a
// switch of agents leaves in the inbox: "agent codex", "agent default".
const ControlAgent = "agent"

// Place is where a conversation lives on a platform. Both fields are opaque
// to the core: for Telegram Chat is the chat id and Thread the forum topic
// id; for Slack the channel and the thread timestamp; for Matrix the room id
// and an empty Thread. Pacing uses them: limits per conversation apply to
// one (Chat, Thread) pair, limits per group to everything sharing a Chat
// (what Telegram calls "per chat" counts a supergroup's topics together).
type Place struct {
	Chat   string `json:"chat"`
	Thread string `json:"thread,omitempty"`
}

// IsZero reports whether p is unset.
func (p Place) IsZero() bool { return p == Place{} }

// Binding is a session's presence on one adapter.
type Binding struct {
	Adapter AdapterName `json:"adapter"`
	Place   Place       `json:"place"`
	// Output is the live output message the session edits in place.
	Output OutputState `json:"output"`
	// Progress is the turn's tool progress message, like Output.
	Progress OutputState `json:"progress,omitzero"`
	// Shown is the title and status the platform shows now, so the
	// status is only shown again when it would change something.
	Shown StatusView `json:"shown"`
	// Meta is the adapter's own state for this binding (the ts of a
	// header message it owns, the event holding a question's reactions),
	// opaque to core and persisted with the binding. The adapter sets it
	// when it binds and may replace it through StatusShower.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// OutputState is what the binding's output message shows. It is persisted
// after every successful platform operation so that a restarted daemon
// resumes editing the same message instead of posting a duplicate.
type OutputState struct {
	// Ref is the platform message; zero when no output message exists yet
	// for the current turn.
	Ref MessageRef `json:"ref"`
	// Digest is a hash of the payload the message shows now.
	Digest string `json:"digest,omitempty"`
	// Turn counts completed turns. An output update for a later turn starts
	// a new output message; the previous one stays as it is.
	Turn uint64 `json:"turn"`
	// Prev is the previous turn's output message (of turn PrevTurn), kept
	// so that a final edit held back past the next turn's start (failures,
	// an outage) still lands in its own turn's message.
	Prev     MessageRef `json:"prev,omitzero"`
	PrevTurn uint64     `json:"prev_turn,omitempty"`
}

// MessageRef points at one message on one platform. ID is the platform's own
// message id (a Telegram message id, a Slack ts, a Matrix event id) as an
// opaque string.
type MessageRef struct {
	Adapter AdapterName `json:"adapter,omitempty"`
	Place   Place       `json:"place"`
	ID      string      `json:"id,omitempty"`
}

// IsZero reports whether r points at nothing.
func (r MessageRef) IsZero() bool { return r.ID == "" }

// Question is an open question shown with options.
type Question struct {
	ID      string    `json:"id"`
	Text    string    `json:"text"`
	Options []string  `json:"options,omitempty"`
	Asked   time.Time `json:"asked"`
	// Shown are the platform messages showing the question, recorded by
	// the dispatcher as they are sent, so that a withdrawal can edit them.
	Shown []MessageRef `json:"shown,omitempty"`
	// Call, set for an approval (RequestApproval), is the id of the tool
	// call its answer decides, and Digest that call's ToolCall.Digest as
	// the question shows it: the decision is recorded for that call as
	// shown, not for whatever the call id names later. An approval is
	// answered only by a choice naming it (Command.QuestionID), never by a
	// typed number.
	Call   string `json:"call,omitempty"`
	Digest string `json:"digest,omitempty"`
}
