package delivery

import "github.com/parley-chat/parley/core"

// The words people read in chat that the delivery engine adds itself (the
// agent's and people's own words pass through): one file, so that they are
// reviewed together and core stays free of them. The progress message's
// lines are ProgressText's (progress.go).
const (
	// textDone is a turn's notifying "done" message, sent when nothing
	// else notified the person during the turn.
	textDone = "✅ Done"
	// textCancelRequested shows a cancel request that carried no text.
	textCancelRequested = "⏹ Cancel requested"
	// textChooseByNumber ends a question on a platform without buttons,
	// below its numbered options.
	textChooseByNumber = "\n\nReply with the number of your choice."
	// textRefused tells the person that a message they wait for was
	// refused for good by the platform.
	textRefused = "⚠️ A message from the agent could not be shown here: the platform refused it. The operator's log says why."
	// textFileAttached heads the tail of a final output sent whole as a
	// file, before the tail marker.
	textFileAttached = "📄 The full output is attached as a file.\n\n"
	// textFileCaption is the caption of that file.
	textFileCaption = "Full output"
	// textExpired and textWithdrawn end a question closed unanswered.
	textExpired   = "⌛ This question expired without an answer; it is no longer open."
	textWithdrawn = "✖ This question was withdrawn; it is no longer open."
)

// textAttachment is the line naming an attachment on a platform that
// cannot receive files.
func textAttachment(name string) string { return "\n📎 " + name }

// textFrom marks a person's message shown on other platforms with their
// name.
func textFrom(who, text string) string { return "**" + who + ":** " + text }

// ClosedQuestionText is what a withdrawn question's messages show.
func ClosedQuestionText(question, why string) string {
	note := textExpired
	if why == core.QuestionCancelled {
		note = textWithdrawn
	}
	return question + "\n\n_" + note + "_"
}
