package mcp

import (
	"context"
	"fmt"

	"github.com/parley-chat/parley/core"
)

// chat_read_since's author filter: an orchestrator that only wants what
// people wrote passes author "user". Without it every message is read, as
// specified. The filter reads on past the messages it skips until it has
// limit messages or the inbox ends, and last_id is the last message read,
// kept or not, so that the next call starts after the skipped ones too.

// filterPage is how many messages one store read takes while filtering.
const filterPage = 256

// validAuthor checks an author filter.
func validAuthor(a string) error {
	switch core.Role(a) {
	case "", core.RoleUser, core.RoleAssistant, core.RoleSystem:
		return nil
	}
	return toolError(fmt.Sprintf("author %q is not one of user, assistant, system (or omit it for every message)", a))
}

// readByAuthor reads up to limit messages of session after after whose
// author is author, and returns them with the id of the last message read.
func (s *Server) readByAuthor(ctx context.Context, session core.SessionID, after core.MessageID, limit int, author core.Role) ([]core.Message, core.MessageID, error) {
	var out []core.Message
	last := after
	for len(out) < limit {
		page, err := s.opts.Store.Inbox(ctx, session, last, filterPage)
		if err != nil {
			return nil, "", err
		}
		for _, m := range page {
			last = m.ID
			if m.Role == author {
				out = append(out, m)
				if len(out) == limit {
					return out, last, nil
				}
			}
		}
		if len(page) < filterPage {
			break
		}
	}
	return out, last, nil
}
