package core

import "time"

// Role is who authored an inbox message.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"      // a person (or a tool speaking for one)
	RoleAssistant Role = "assistant" // the agent
	RoleSystem    Role = "system"    // parley itself (notices)
)

// Actor is the person or program behind a command, as the platform names it.
type Actor struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// Attachment is a file that came with a message or goes out with one: the
// copy a FileStore took of it, never a file read again by name. Digest
// names that copy by its content, and Path is where the daemon that took
// it wrote it under its data directory (what an agent reads); the
// platform's or the agent's file name is kept in Name but never used as a
// path.
type Attachment struct {
	Name string `json:"name"`
	Mime string `json:"mime,omitempty"`
	Size int64  `json:"size"`
	Path string `json:"path,omitempty"`
	// Digest is the SHA-256 of the content, in lower-case hex. Empty only
	// in messages stored before parley kept copies: such a file is not
	// sent (FileStore.Open refuses it).
	Digest string `json:"digest,omitempty"`
}

// Message is one entry of a session's durable inbox.
type Message struct {
	ID          MessageID    `json:"id"`
	Session     SessionID    `json:"session_id"`
	Time        time.Time    `json:"ts"`
	Role        Role         `json:"author"`
	Actor       Actor        `json:"actor,omitzero"`
	Origin      Origin       `json:"origin,omitempty"`
	Mime        string       `json:"mime"`
	Content     string       `json:"content"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// Ref is the platform message the input came from, if any; the cleanup
	// ledger uses it.
	Ref MessageRef `json:"ref,omitzero"`
}

// Content types of inbox messages.
const (
	// MimeMarkdown is the default content type of messages.
	MimeMarkdown = "text/markdown"
	// MimeControl marks a person's control command for the agent; Content
	// is the command ("cancel", "close", "agent NAME": ControlAgent).
	MimeControl = "application/vnd.parley.control"
	// MimeQuestion marks an agent's question (ui.ask); Content is the
	// question text.
	MimeQuestion = "application/vnd.parley.question"
	// MimeAnswer marks a person's answer to a question (ui.ask, an
	// approval); Content is the chosen option or the text. The agent that
	// asked got it as the tool's result: it is no new turn.
	MimeAnswer = "application/vnd.parley.answer"
)
