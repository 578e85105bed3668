package telegram

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-telegram/bot"

	"github.com/parley-chat/parley/core"
)

// Telegram's error descriptions that mean something to parley. The Bot API
// has no error codes beyond HTTP status, so the description text is the
// contract (these are the texts Telegram sends).
const (
	descNotModified   = "message is not modified"
	descEditNotFound  = "message to edit not found"
	descDelNotFound   = "message to delete not found"
	descThreadMissing = "message thread not found"
	descTopicClosed   = "TOPIC_CLOSED"
	descTopicDeleted  = "TOPIC_DELETED"
	descTopicInvalid  = "TOPIC_ID_INVALID"
	descParseEntities = "can't parse entities"
	descEmptyText     = "message text is empty"
)

// classify turns a go-telegram/bot error into parley's sentinels:
// *core.RateLimitError for 429, core.ErrNotModified, core.ErrMessageGone,
// core.ErrThreadGone, and core.Permanent for other 4xx answers (retrying a
// bad request cannot help). Network errors and 5xx stay retryable.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var tooMany *bot.TooManyRequestsError
	if errors.As(err, &tooMany) {
		return &core.RateLimitError{RetryAfter: time.Duration(max(tooMany.RetryAfter, 1)) * time.Second, Err: err}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, descNotModified):
		return fmt.Errorf("telegram: %s: %w", op, core.ErrNotModified)
	case strings.Contains(msg, descEditNotFound), strings.Contains(msg, descDelNotFound):
		return fmt.Errorf("telegram: %s: %w", op, core.ErrMessageGone)
	case strings.Contains(msg, descThreadMissing), strings.Contains(msg, descTopicClosed), strings.Contains(msg, descTopicDeleted),
		strings.Contains(msg, descTopicInvalid):
		return fmt.Errorf("telegram: %s: %w", op, core.ErrThreadGone)
	case errors.Is(err, bot.ErrorBadRequest), errors.Is(err, bot.ErrorForbidden),
		errors.Is(err, bot.ErrorUnauthorized), errors.Is(err, bot.ErrorNotFound):
		return core.Permanent(fmt.Errorf("telegram: %s: %w", op, err))
	}
	return fmt.Errorf("telegram: %s: %w", op, err)
}

func isParseError(err error) bool {
	return err != nil && strings.Contains(err.Error(), descParseEntities)
}

// richUnsupported reports an answer meaning the server does not speak rich
// messages: 404 for sendRichMessage, or an edit whose rich_message was
// ignored so the text came out empty.
func richUnsupported(err error) bool {
	return err != nil && (errors.Is(err, bot.ErrorNotFound) || strings.Contains(err.Error(), descEmptyText))
}

func contains(err error, parts ...string) bool {
	for _, p := range parts {
		if strings.Contains(err.Error(), p) {
			return true
		}
	}
	return false
}
