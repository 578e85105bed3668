package core

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// LengthUnit says how a platform counts a message's length.
type LengthUnit int

// Length units.
const (
	Bytes LengthUnit = iota // UTF-8 bytes (Slack, Matrix event size)
	Runes                   // Unicode code points
	UTF16                   // UTF-16 code units of the visible text (Telegram)
)

// Markup names the text dialect an adapter renders the agent's markdown
// into. It is open: core declares the two that are no platform's own, and
// a platform's dialect is declared by its adapter (telegram.MarkupHTML),
// so a new platform adds no constant here. Nothing in core branches on it.
type Markup string

// The dialects that belong to no platform.
const (
	MarkupPlain    Markup = "plain"
	MarkupMarkdown Markup = "markdown" // passed through (web page, Telegram rich messages)
)

// Capabilities are what an adapter declares about its platform beyond the
// optional interfaces it implements (Editor, Deleter, StatusShower, Binder,
// FileSender, TypingNotifier, Measurer): those say by their presence what it
// can do.
type Capabilities struct {
	// MaxLength is the longest text one message may carry, counted in
	// LengthUnit, after rendering into Markup. Zero means unlimited.
	MaxLength  int        `json:"max_length"`
	LengthUnit LengthUnit `json:"length_unit"`
	Markup     Markup     `json:"markup"`
	// FileThreshold is the length (in LengthUnit) of a final output past
	// which it is delivered as a file rather than as continuation messages,
	// when the adapter is a FileSender. Zero means never as a file.
	FileThreshold int `json:"file_threshold"`
	// DeleteOthers is true when the adapter can delete messages people
	// wrote (Telegram admins can; Slack bots cannot). Without it the
	// cleanup rules for people's messages are skipped on this adapter.
	DeleteOthers bool `json:"delete_others"`
	// Buttons is true when OutMessage.Buttons are shown as clickable
	// buttons; otherwise the core renders options as a numbered list.
	Buttons bool `json:"buttons"`
	// Limits are the platform's rate limits, each in its scope. The outbox
	// keeps every operation (sends, edits, deletes, renames, typing
	// indicators, and the thread creation inside a first send) within all
	// the limits that apply to its kind.
	Limits []Limit `json:"limits,omitempty"`
	// EditInterval is the least time between two edits of one message:
	// updates in between coalesce and only the newest is shown. Platforms
	// where every edit is a stored event (Matrix) want it longer than ones
	// where edits are cheap. Zero means the outbox's default.
	EditInterval time.Duration `json:"edit_interval,omitempty"`
	// FollowsEvents is true when the adapter shows sessions itself, from
	// the store and the bus (the web page renders each session's UIState
	// from the event log), so it needs no platform operations: the
	// dispatcher makes none for it — no sends, edits, deletes, bindings or
	// journal entries — and its Send, Edit and Delete are never called by
	// core. Routing still counts it: a reply to input typed there goes
	// there, which means it is not broadcast to the other platforms.
	FollowsEvents bool `json:"follows_events,omitempty"`
}

// MessageKind tells an adapter what an outgoing message is, for rendering
// (a notice may be shown in italics) and notification choices.
type MessageKind string

// Outgoing message kinds.
const (
	KindOutput       MessageKind = "output"       // the live output message
	KindContinuation MessageKind = "continuation" // the rest of a long final output
	KindAssistant    MessageKind = "assistant"    // chat.assistant.post
	KindHuman        MessageKind = "human"        // a person's input reflected to another platform
	KindNotice       MessageKind = "notice"       // feedback, errors
	KindQuestion     MessageKind = "question"     // ui.ask, with buttons
	KindTurnDone     MessageKind = "turn_done"    // the one notifying message of a turn
)

// Button is one choice of a question. Data is opaque to adapters and at
// most 48 bytes, so an adapter can prefix it and stay within Telegram's
// 64-byte callback_data; the click comes back as an Answer command with
// QuestionID and Text taken from Data by ParseButtonData.
type Button struct {
	Label string `json:"label"`
	Data  string `json:"data"`
}

// OutMessage is one message to send or the new content of one to edit.
type OutMessage struct {
	Kind MessageKind `json:"kind"`
	// Text is markdown; the adapter renders it into its dialect.
	Text string `json:"text"`
	// Silent asks the platform not to notify (edits are always silent).
	Silent  bool     `json:"silent,omitempty"`
	Buttons []Button `json:"buttons,omitempty"`
	// Key is stable for one logical send across retries and restarts (the
	// journal's operation key). A platform with idempotent sends uses it
	// (Matrix transaction ids) so that a send repeated after a crash between
	// the platform's answer and the journal's confirmation shows once.
	// Empty for messages that are edited in place.
	Key string `json:"key,omitempty"`
}

// Adapter is a platform. Adapters turn what people do into Commands for the
// Handler, and perform the primitive operations the Outbox asks of them.
// Every method that talks to the platform blocks until the platform answered
// and returns the sentinel errors of this package for the platform's
// failures: ErrMessageGone, ErrThreadGone, ErrNotModified, *RateLimitError.
type Adapter interface {
	// Name is the adapter's name, also the Origin of its input.
	Name() AdapterName
	// Capabilities describes the platform. Limits and EditInterval must
	// not change while the adapter runs (the outbox reads them once); the
	// rest may change as the adapter learns what the platform supports
	// (Telegram's rich messages raise MaxLength), and is read again for
	// every message.
	Capabilities() Capabilities
	// Run receives from the platform and hands each update to h, in order
	// per conversation, acknowledging it only after h returned (see
	// Handler). It blocks until ctx is done or the platform fails for good.
	Run(ctx context.Context, h Handler) error
	// Send posts a new message at place and returns its reference.
	Send(ctx context.Context, place Place, m OutMessage) (MessageRef, error)
}

// Editor is an Adapter that can edit its own messages.
type Editor interface {
	// Edit replaces the content of ref. It returns ErrNotModified when the
	// platform reports no change (callers treat that as success) and
	// ErrMessageGone when the message no longer exists.
	Edit(ctx context.Context, ref MessageRef, m OutMessage) error
}

// Deleter is an Adapter that can delete messages. Whether it can delete
// people's messages too is Capabilities.DeleteOthers.
type Deleter interface {
	// Delete removes ref. It returns ErrMessageGone when the message is
	// already gone.
	Delete(ctx context.Context, ref MessageRef) error
}

// StatusView is what people should see of a session's title and status.
// Core says what it is; a StatusShower decides how it looks.
type StatusView struct {
	Title  string `json:"title"`
	Status Status `json:"status"`
}

// StatusShower is an Adapter that shows a session's title and status in its
// conversation: Telegram renames the forum topic with a status emoji, Slack
// edits a header message or reacts on the thread's root, Matrix sets the
// room name. The dispatcher calls it only when the view changed since the
// platform last showed one, so a turn changes what people see at most as
// often as its visible status changes.
type StatusShower interface {
	// ShowStatus makes b's conversation show v. It returns the binding's
	// new Meta (nil keeps the current one), for adapters that remember
	// what they posted (the ts of a Slack header message). It blocks until
	// the platform answered.
	ShowStatus(ctx context.Context, b Binding, v StatusView) (meta json.RawMessage, err error)
}

// Measurer is an Adapter that measures markdown the way its platform counts
// length after rendering (Telegram counts the visible text after entity
// parsing). Long outputs are split and tailed by this measure, so limits
// are met without hand-proven bounds on how much rendering adds.
type Measurer interface {
	// RenderedLength is the length of md once rendered, in the unit of
	// Capabilities.MaxLength.
	RenderedLength(md string) int
}

// Binder is an Adapter that can create a conversation for a session that
// started elsewhere (a forum topic, a thread root, a room). Sessions reach a
// Binder adapter even before anyone wrote there.
type Binder interface {
	// Bind creates the session's conversation and returns the binding:
	// its Place and, optionally, the adapter's own Meta to keep with it;
	// core fills in the rest. It is called at most once per session at a
	// time (the dispatcher locks per session): platforms such as Telegram
	// cannot create topics idempotently.
	Bind(ctx context.Context, s Session) (Binding, error)
}

// BindPlacer is a Binder whose Bind is itself a call in a conversation
// that has limits (Telegram creates topics in the group, which counts
// against the group's budget). Operations for a session not yet bound are
// paced at BindPlace until the binding exists.
type BindPlacer interface {
	BindPlace() Place
}

// FileSender is an Adapter that can send documents.
type FileSender interface {
	// SendFile uploads a document named a.Name with caption at place. Its
	// content is body, a.Size bytes, which the delivery engine opened
	// from parley's own copy (FileStore.Open) for this call: the adapter
	// reads it once and opens no file itself. The caller closes body.
	SendFile(ctx context.Context, place Place, a Attachment, body io.Reader, caption string) (MessageRef, error)
}

// TypingNotifier is an Adapter that can show that the agent is working.
// Indicators go through the outbox like messages, at the lowest priority:
// they are paced by the limits that count OpTyping, never sent to a scope
// paused by a 429, and skipped rather than sent late.
type TypingNotifier interface {
	// Typing shows a short-lived typing indicator at place.
	Typing(ctx context.Context, place Place) error
}
