package slack

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// Slack's error codes (the "error" of an ok:false answer) that mean
// something to parley.
const (
	codeMessageNotFound = "message_not_found"
	codeThreadNotFound  = "thread_not_found"
	codeRateLimited     = "ratelimited"
	codeMsgTooLong      = "msg_too_long"
	codeInvalidBlocks   = "invalid_blocks"
	codeCantUpdate      = "cant_update_message"
	codeAlreadyReacted  = "already_reacted"
	codeNoReaction      = "no_reaction"
	codeFileNotFound    = "file_not_found"
)

// fixes says, for the refusals retrying cannot change, what to do about
// them. Every code listed is permanent; the words follow the code in the
// error.
var fixes = map[string]string{
	"channel_not_found":       "the channel does not exist or the bot cannot see it: check [slack] channel, and invite the bot to a private channel",
	"not_in_channel":          "the bot is not a member of the channel: type /invite @<bot> in it",
	"is_archived":             "the channel is archived: unarchive it or set [slack] channel to another",
	"invalid_auth":            "the bot token was refused: check [slack] bot_token (OAuth & Permissions → Bot User OAuth Token)",
	"not_authed":              "no token was sent: set [slack] bot_token",
	"account_inactive":        "the token belongs to a deactivated user or workspace: reinstall the app and update [slack] bot_token",
	"token_revoked":           "the token was revoked: reinstall the app and update [slack] bot_token",
	"token_expired":           "the token expired: reinstall the app (or turn token rotation off) and update [slack] bot_token",
	"missing_scope":           "the app lacks a scope: add it under OAuth & Permissions → Bot Token Scopes (the README's manifest lists them) and reinstall",
	"not_allowed_token_type":  "this method does not take this kind of token: check that [slack] bot_token is the xoxb- token",
	"cant_update_message":     "the message is not the bot's: bots can edit only their own messages",
	"cant_delete_message":     "the message is not the bot's: bots can delete only their own messages",
	"msg_too_long":            "the message is longer than Slack takes",
	"invalid_blocks":          "Slack refused the message's blocks",
	"invalid_blocks_format":   "Slack refused the message's blocks",
	"no_text":                 "the message was empty",
	"invalid_arguments":       "Slack refused the call's arguments",
	"restricted_action":       "a workspace preference forbids the bot to post in this channel",
	"team_access_not_granted": "the token has no access to this workspace: reinstall the app in it",
	"ekm_access_denied":       "the workspace's key management denied access",
	"no_permission":           "the token lacks a permission for this call: check the app's scopes",
	"method_deprecated":       "Slack retired this method",
	"unknown_method":          "the server does not have this method",
	"file_not_found":          "the file is gone",
	"invalid_ts":              "the message reference is malformed",
	"user_not_found":          "no such member in the workspace",
	"not_allowed":             "Slack does not allow this here",
}

// transientCodes are ok:false answers that say Slack itself failed, worth
// another try.
var transientCodes = map[string]bool{
	"internal_error": true, "fatal_error": true, "service_unavailable": true, "request_timeout": true,
}

// defaultRetryAfter is the pause after a 429 that did not say how long.
const defaultRetryAfter = 5 * time.Second

// scopeOf is what Slack throttles when a method is refused with 429:
// chat.postMessage per channel (core's group), the other methods parley
// calls per workspace (the account).
func scopeOf(method string) core.Scope {
	if method == "chat.postMessage" {
		return core.ScopeGroup
	}
	return core.ScopeAccount
}

// rateLimited is method's 429 as core says it: the scope Slack limits the
// method in, and the operation kinds that call it, since Slack counts each
// method on its own (a throttled chat.update holds back no new message).
func rateLimited(method string, after time.Duration, err error) *core.RateLimitError {
	return &core.RateLimitError{RetryAfter: after, Scope: scopeOf(method), Kinds: kindsOf(method),
		Err: fmt.Errorf("slack: %s: %w", method, err)}
}

// kindsOf are the operation kinds whose calls go to method. chat.update
// serves both output edits and status (a bot-owned root's title);
// methods not listed hold back every kind.
func kindsOf(method string) []core.OpKind {
	switch method {
	case "chat.postMessage", "files.getUploadURLExternal", "files.completeUploadExternal":
		return []core.OpKind{core.OpSend}
	case "chat.update":
		return []core.OpKind{core.OpEdit, core.OpRename}
	case "chat.delete":
		return []core.OpKind{core.OpDelete}
	case "reactions.add", "reactions.remove":
		return []core.OpKind{core.OpRename}
	case "assistant.threads.setStatus":
		return []core.OpKind{core.OpTyping}
	}
	return nil
}

// classify turns a slack-go error from method into parley's sentinels:
// *core.RateLimitError for 429 (with the scope the method is limited in),
// core.ErrMessageGone, core.ErrThreadGone, core.Permanent for refusals
// retrying cannot change (with what to do about them); Slack's own
// failures, 5xx answers, timeouts and network errors, and codes parley does
// not know, stay retryable.
func classify(method string, err error) error {
	if err == nil {
		return nil
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return rateLimited(method, max(rl.RetryAfter, time.Second), err)
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		switch {
		case sc.Code == http.StatusTooManyRequests:
			return rateLimited(method, defaultRetryAfter, err)
		case sc.Code >= 500:
			return fmt.Errorf("slack: %s: %w", method, err)
		case sc.Code == http.StatusNotFound || sc.Code == http.StatusGone:
			return core.Permanent(fmt.Errorf("slack: %s: %w (the server does not have this method or file)", method, err))
		case sc.Code >= 400:
			return core.Permanent(fmt.Errorf("slack: %s: %w", method, err))
		}
		return fmt.Errorf("slack: %s: %w", method, err)
	}
	code := errorCode(err)
	switch {
	case code == "":
		return fmt.Errorf("slack: %s: %w", method, err)
	case code == codeRateLimited:
		return rateLimited(method, defaultRetryAfter, err)
	case code == codeMessageNotFound:
		return fmt.Errorf("slack: %s: %w", method, core.ErrMessageGone)
	case code == codeThreadNotFound:
		return fmt.Errorf("slack: %s: %w", method, core.ErrThreadGone)
	case transientCodes[code]:
		return fmt.Errorf("slack: %s: %w", method, err)
	}
	if fix, ok := fixes[code]; ok {
		return core.Permanent(fmt.Errorf("slack: %s: %w: %s%s", method, err, fix, scopeDetail(err)))
	}
	// A code parley does not know: retried, and logged by the outbox
	// with the code, rather than losing a message to a new wording.
	return fmt.Errorf("slack: %s: %w", method, err)
}

// errorCode is Slack's error code of an ok:false answer, or "".
func errorCode(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return ""
}

// hasCode reports whether err is Slack's answer with one of codes.
func hasCode(err error, codes ...string) bool {
	c := errorCode(err)
	for _, code := range codes {
		if c != "" && c == code {
			return true
		}
	}
	return false
}

// scopeDetail names the scope a missing_scope answer needed, when Slack
// said.
func scopeDetail(err error) string {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Needed == "" {
		return ""
	}
	return " (needed: " + strings.ReplaceAll(se.Needed, ",", ", ") + ")"
}
