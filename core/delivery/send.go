package delivery

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/parley-chat/parley/core"
)

// sender puts the Dispatcher's new messages and documents on platforms:
// each one an outbox op at the session's place, journaled under its key
// when its event is, bound first where the session is not bound yet, and
// reported to sent once the platform took it.
type sender struct {
	outbox   *Outbox
	bindings *bindings
	journal  *journal
	log      *slog.Logger
	// sent is called after every message sent (Dispatcher.sent).
	sent func(ctx context.Context, s Sent)
	// files holds the copies of the files agents send
	// (DispatcherOptions.Files).
	files core.FileStore
}

// send enqueues one new message; notify=false sends it silently.
func (sd *sender) send(s core.Session, a core.Adapter, e core.Event, j *delivery, key string, m core.OutMessage, lt core.Lifetime, notify bool) {
	sd.enqueueSend(s, a, e, j, key, m, lt, notify, core.OpSend)
}

func (sd *sender) enqueueSend(s core.Session, a core.Adapter, e core.Event, j *delivery, key string, m core.OutMessage, lt core.Lifetime, notify bool, prio core.OpKind) {
	if !sd.journal.add(j, key) {
		return
	}
	m.Silent = m.Silent || !notify
	m.Key = sendKey(e.Seq, key)
	sd.outbox.Enqueue(core.Op{Kind: prio, Calls: []core.OpKind{core.OpSend}, Adapter: a.Name(), Place: queuePlace(s, a),
		Run: sd.journal.guard(j, func(ctx context.Context, at core.Place) error {
			b, err := sd.bindings.get(ctx, a, s.ID, at)
			if err != nil {
				return err
			}
			ref, err := sd.bindings.sendAt(ctx, a, s.ID, &b, m)
			if err != nil {
				return err
			}
			sd.sent(ctx, Sent{Session: s.ID, Ref: ref, Kind: m.Kind, Lifetime: lt, Seq: e.Seq, Question: e.QuestionID})
			return nil
		}),
		Done: sd.doneFunc(s, a, j, key, m.Kind)})
}

// fileTimeout is the deadline of a document upload, longer than a message's.
const fileTimeout = 2 * time.Minute

// sendFile enqueues one document for the session's binding on a, whose
// content body opens afresh for each attempt.
func (sd *sender) sendFile(s core.Session, a core.Adapter, fs core.FileSender, e core.Event, j *delivery, key string, f core.Attachment, caption string, body func() (io.ReadCloser, error)) {
	if !sd.journal.add(j, key) {
		return
	}
	sd.outbox.Enqueue(core.Op{Kind: core.OpSend, Adapter: a.Name(), Place: queuePlace(s, a), Timeout: fileTimeout,
		Run: sd.journal.guard(j, func(ctx context.Context, at core.Place) error {
			b, err := sd.bindings.get(ctx, a, s.ID, at)
			if err != nil {
				return err
			}
			r, err := body()
			if err != nil {
				return err
			}
			defer r.Close()
			ref, err := fs.SendFile(ctx, b.Place, f, r, caption)
			if err == nil {
				sd.sent(ctx, Sent{Session: s.ID, Ref: ref, Kind: core.KindAssistant, Lifetime: core.LifetimeManual, Seq: e.Seq})
			}
			return err
		}),
		Done: sd.doneFunc(s, a, j, key, core.KindAssistant)})
}

// copyOf opens parley's copy of the attachment f (core.FileStore), the
// only thing a document is ever read from: never the path the agent gave.
// A copy that is not there or not intact will not be by retrying.
func (sd *sender) copyOf(f core.Attachment) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		if sd.files == nil {
			return nil, core.Permanent(fmt.Errorf("delivery: file %s: this parley keeps no copies of files", f.Name))
		}
		r, err := sd.files.Open(f)
		if err != nil {
			sd.log.Warn("a file is not sent: parley's copy of it is not on this machine or not intact", "file", f.Name, "err", err)
			return nil, core.Permanent(fmt.Errorf("delivery: %w", err))
		}
		return r, nil
	}
}

// doneFunc confirms a journaled operation and, when a message a person is
// waiting for was refused for good, tells them with a short notice.
func (sd *sender) doneFunc(s core.Session, a core.Adapter, j *delivery, key string, kind core.MessageKind) func(error) {
	return func(err error) {
		sd.journal.confirm(j, a.Name(), key, err)
		if err == nil || !core.IsPermanent(err) || lostClaim(err) || kind == core.KindNotice || kind == core.KindHuman || kind == core.KindTurnDone {
			return
		}
		sd.log.Warn("a message could not be delivered; telling the person", "adapter", a.Name(), "session", s.ID, "kind", kind)
		m := core.OutMessage{Kind: core.KindNotice, Silent: true,
			Text: textRefused}
		sd.outbox.Enqueue(core.Op{Kind: core.OpSend, Adapter: a.Name(), Place: queuePlace(s, a),
			Run: func(ctx context.Context, at core.Place) error {
				b, err := sd.bindings.get(ctx, a, s.ID, at)
				if err != nil {
					return err
				}
				ref, err := a.Send(ctx, b.Place, m)
				if err == nil {
					sd.sent(ctx, Sent{Session: s.ID, Ref: ref, Kind: core.KindNotice, Lifetime: core.LifetimeNextNotice})
				}
				return err
			}})
	}
}
