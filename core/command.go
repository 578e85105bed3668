package core

import "context"

// CommandKind names what a Command asks for.
type CommandKind string

// The commands. Adapters produce the human ones; the MCP server, the HTTP API
// and hooks produce the agent and API ones. All of them run through the same
// Handler (commands.Service).
const (
	// CreateSession starts a session. Title is optional. When Place is set
	// the session is bound to the origin adapter at that place at once.
	CreateSession CommandKind = "create_session"
	// SendMessage appends a person's (or API's) message to the inbox.
	SendMessage CommandKind = "send_message"
	// Cancel asks the agent to stop its turn.
	Cancel CommandKind = "cancel"
	// Close closes the session; later input is refused.
	Close CommandKind = "close"
	// Rename sets the session title.
	Rename CommandKind = "rename"
	// SetAgent switches the session to the agent Agent names (empty, or
	// DefaultAgent: the default one); the new agent starts its own
	// conversation. A person's switch is an inbox message for the agent
	// side to read (ControlAgent); without Agent the command only lists
	// the agents, as a notice for the person who asked.
	SetAgent CommandKind = "set_agent"
	// CheckAgent refuses an Agent name the Handler does not know
	// (ErrInvalid, naming the agents) and does nothing else: an adapter
	// asks it before it makes a topic, thread or room for a session that
	// names an agent, so that a mistyped name leaves none behind.
	CheckAgent CommandKind = "check_agent"
	// Answer is a person's answer to a question (a button click or a reply).
	Answer CommandKind = "answer"
	// AssistantPost is a message from the agent, delivered as a new message.
	AssistantPost CommandKind = "assistant_post"
	// OutputUpdate replaces the live output the session's output message shows.
	OutputUpdate CommandKind = "output_update"
	// YieldTurn marks the agent's turn complete.
	YieldTurn CommandKind = "yield_turn"
	// Ask shows a question with options to the people of a session.
	Ask CommandKind = "ask"
	// Withdraw closes an open question unanswered (its ui.ask timed out
	// or was cancelled): QuestionID names it, Text says why
	// (QuestionExpired or QuestionCancelled). Its buttons are taken away
	// on every platform, and a later answer is refused as no longer open.
	Withdraw CommandKind = "withdraw"
	// StatusQuery asks for the session's status; the answer is a notice
	// for the person who asked.
	StatusQuery CommandKind = "status"
	// Notice is feedback from an adapter for the person who caused it
	// ("🎤 Transcribing…"); it goes back to the origin only.
	Notice CommandKind = "notice"
	// Pair is sent by an adapter for a person not on the allow-list who
	// wrote to the bot in a private chat at Place: with pairing on, the
	// Handler gives them a one-time code (a notice at Place) for the
	// operator to approve; otherwise it is refused with ErrUnauthorized
	// like any other command of theirs.
	Pair CommandKind = "pair"
)

// Why a question was closed unanswered: the Text of a Withdraw command and
// of its EventQuestionClosed (and a UI item's Closed).
const (
	QuestionExpired   = "expired"
	QuestionCancelled = "cancelled"
)

// Command is a platform-neutral request. Fields a kind does not use are
// ignored. Adapters fill Origin with their own name, Actor with the person,
// Place with where it happened and PlatformID with the platform's message or
// update id; the Handler finds the session from Session or, failing that,
// from the binding at Place.
type Command struct {
	Kind    CommandKind `json:"kind"`
	Session SessionID   `json:"session_id,omitempty"`
	Origin  Origin      `json:"origin"`
	Actor   Actor       `json:"actor,omitzero"`
	Place   Place       `json:"place,omitzero"`
	// PlatformID identifies the platform message or update the command
	// came from. (Origin, PlatformID) is the dedup key: a redelivered
	// update is recognised and not appended twice. It must be unique
	// across the whole origin, so adapters qualify ids that are unique
	// only within a chat (Telegram's message ids: "chat:message").
	PlatformID string `json:"platform_id,omitempty"`
	// Ref is the platform message the person wrote, for the cleanup ledger.
	Ref MessageRef `json:"ref,omitzero"`

	Title string `json:"title,omitempty"`
	// Placeholder says, for CreateSession, that nobody chose Title: it
	// is the placeholder an adapter had to name the session's topic,
	// thread or room with before the session existed. The session keeps
	// it as its placeholder (Session.Placeholder), so the first person's
	// message with text names the session. A CreateSession without a
	// Title gets the Handler's own placeholder.
	Placeholder bool `json:"placeholder,omitempty"`
	// Agent names the agent of a CreateSession or SetAgent (empty, or
	// DefaultAgent: the default one).
	Agent       string       `json:"agent,omitempty"`
	Text        string       `json:"text,omitempty"`
	Mime        string       `json:"mime,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// Final marks an OutputUpdate as the turn's final output.
	Final bool `json:"final,omitempty"`
	// QuestionID and Options belong to Ask and Answer.
	QuestionID string   `json:"question_id,omitempty"`
	Options    []string `json:"options,omitempty"`
	// Option is the 1-based option an Answer chose (a button click);
	// zero means Text is the answer.
	Option int `json:"option,omitempty"`
	// Call belongs to the tool commands (ToolCallStart, ToolCallOutput,
	// RequestApproval).
	Call *ToolCall `json:"call,omitempty"`
	// Lifetime is the cleanup lifetime of a Notice; zero means next_notice.
	Lifetime Lifetime `json:"lifetime,omitempty"`
}

// Result is what a handled command produced.
type Result struct {
	Session SessionID `json:"session_id"`
	Message Message   `json:"message,omitzero"`
	// Duplicate is true when the command was a redelivery of one already
	// handled; Message is then the message stored the first time.
	Duplicate bool `json:"duplicate,omitempty"`
	// Queued is true when the message arrived while the agent was busy.
	Queued bool `json:"queued,omitempty"`
}

// Handler executes commands. commands.Service implements it.
//
// Handle blocks until the command's effects are durable in the store (or it
// failed). An adapter acknowledges the platform update only after Handle
// returned nil (a Result with Duplicate set included) or one of the errors
// that say the update was dealt with: ErrUnauthorized (ignore silently),
// ErrSessionClosed, ErrInvalid and ErrNotFound (tell the person why). Any
// other error means it was not stored: retry it, do not acknowledge it.
type Handler interface {
	Handle(ctx context.Context, cmd Command) (Result, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, cmd Command) (Result, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, cmd Command) (Result, error) { return f(ctx, cmd) }
