package matrix_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store/files"
)

// handler records the commands the adapter hands it, admitting only the
// allowed people as commands.Service does.
type handler struct {
	allowed map[string]bool
	mu      sync.Mutex
	cmds    []core.Command
	changed chan struct{}
}

func newHandler(allowed ...id.UserID) *handler {
	h := &handler{allowed: map[string]bool{}, changed: make(chan struct{})}
	for _, u := range allowed {
		h.allowed[string(u)] = true
	}
	return h
}

// admit is the adapter's allow-list: the people in ids, as the handler
// and parley's configured list (matrix.allowed_users) admit them.
func admit(ids ...id.UserID) core.Authorizer {
	return core.AuthorizerFunc(func(_ core.Origin, a core.Actor) bool { return slices.Contains(ids, id.UserID(a.ID)) })
}

func (h *handler) Handle(_ context.Context, cmd core.Command) (core.Result, error) {
	if !h.allowed[cmd.Actor.ID] {
		return core.Result{}, core.ErrUnauthorized
	}
	h.mu.Lock()
	h.cmds = append(h.cmds, cmd)
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	return core.Result{Session: "S1"}, nil
}

// wait returns the first command that match accepts, waiting for it.
func (h *handler) wait(t *testing.T, what string, match func(core.Command) bool) core.Command {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		for _, c := range h.cmds {
			if match(c) {
				h.mu.Unlock()
				return c
			}
		}
		changed := h.changed
		h.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no command %s within 30s; got %+v", what, h.all())
		}
	}
}

func (h *handler) all() []core.Command {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]core.Command(nil), h.cmds...)
}

func (h *handler) count(match func(core.Command) bool) int {
	n := 0
	for _, c := range h.all() {
		if match(c) {
			n++
		}
	}
	return n
}

// world is a Dendrite with the bot, an allowed person and a stranger.
type world struct {
	hs       *matrixtest.Homeserver
	bot      *matrixtest.User
	ann, eve *matrixtest.Person
	store    *cursors
	files    *files.Store
}

func newWorld(t *testing.T) *world {
	hs := matrixtest.Dendrite(t)
	return &world{hs: hs, bot: hs.Register(t, "parley"),
		ann: matrixtest.NewPerson(t, hs.URL, hs.Register(t, "ann")), eve: matrixtest.NewPerson(t, hs.URL, hs.Register(t, "eve")),
		store: newCursors(), files: tempFiles(t)}
}

func (w *world) adapter(t *testing.T, opts matrix.Options) *matrix.Adapter {
	t.Helper()
	opts.Homeserver, opts.UserID, opts.AccessToken = w.hs.URL, w.bot.ID, w.bot.AccessToken
	opts.Allowed = []string{string(w.ann.User.ID)}
	opts.Authorizer = admit(w.ann.User.ID)
	opts.Cursors, opts.Leases, opts.Files, opts.SyncTimeout = w.store, w.store, w.files, 2*time.Second
	opts.HTTPClient = &http.Client{Timeout: time.Minute}
	opts.Logger = slog.New(slog.DiscardHandler)
	a, err := matrix.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run runs a until the returned stop is called (or the test ends).
func run(t *testing.T, a *matrix.Adapter, h core.Handler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// joinedBy waits until the bot's membership in room is m, as the person
// sees it.
func joinedBy(t *testing.T, p *matrixtest.Person, room id.RoomID, bot id.UserID, m event.Membership) {
	t.Helper()
	p.WaitFor(t, room, func(ev *event.Event) bool {
		c, ok := ev.Content.Parsed.(*event.MemberEventContent)
		return ok && ev.Type == event.StateMember && ev.GetStateKey() == string(bot) && c.Membership == m
	}, 30*time.Second)
}

// TestInvitesMessagesAndRestart: an allowed person's invite makes a
// session titled by the room; a stranger's is declined; messages, replies
// and commands become commands, everything else is ignored; a message sent
// while parley is down arrives after it restarts, and nothing handled
// before comes again.
func TestInvitesMessagesAndRestart(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	stop := run(t, w.adapter(t, matrix.Options{}), h)

	room := w.ann.CreateRoom(t, "Plans", w.bot.ID)
	created := h.wait(t, "creating the session", func(c core.Command) bool { return c.Kind == core.CreateSession })
	if created.Place.Chat != string(room) || created.Title != "Plans" || created.Actor.ID != string(w.ann.User.ID) {
		t.Errorf("CreateSession = %+v, want room %s titled Plans by ann", created, room)
	}
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)

	spam := w.eve.CreateRoom(t, "Spam", w.bot.ID)
	joinedBy(t, w.eve, spam, w.bot.ID, event.MembershipLeave)

	hello := w.ann.Send(t, room, "hello there")
	msg := h.wait(t, "for hello", func(c core.Command) bool { return c.Kind == core.SendMessage })
	if msg.Text != "hello there" || msg.PlatformID != string(hello) || msg.Ref.ID != string(hello) || msg.Place.Chat != string(room) {
		t.Errorf("SendMessage = %+v", msg)
	}
	w.ann.SendContent(t, room, event.EventMessage, &event.MessageEventContent{MsgType: event.MsgNotice, Body: "a notice"})
	w.ann.Edit(t, room, hello, "hello edited")
	w.ann.Reply(t, room, hello, "yes, that")
	reply := h.wait(t, "for the reply", func(c core.Command) bool { return c.Kind == core.SendMessage && strings.Contains(c.Text, "yes, that") })
	if reply.Text != "> hello there\n\nyes, that" {
		t.Errorf("reply text %q, want the quoted start of the message replied to", reply.Text)
	}
	w.ann.Send(t, room, "!title  New name ")
	if c := h.wait(t, "rename", func(c core.Command) bool { return c.Kind == core.Rename }); c.Title != "New name" {
		t.Errorf("Rename title %q", c.Title)
	}
	w.ann.Send(t, room, "!status")
	h.wait(t, "status", func(c core.Command) bool { return c.Kind == core.StatusQuery })
	w.ann.Send(t, room, "!help")
	h.wait(t, "help", func(c core.Command) bool { return c.Kind == core.Notice && strings.Contains(c.Text, "!cancel") })
	w.ann.Send(t, room, "!nope")
	h.wait(t, "refusal", func(c core.Command) bool {
		return c.Kind == core.Notice && strings.Contains(c.Text, "unknown command !nope")
	})
	w.ann.Send(t, room, "!cancel")
	h.wait(t, "cancel", func(c core.Command) bool { return c.Kind == core.Cancel })

	w.ann.Invite(t, room, w.eve.User.ID)
	w.eve.WaitInvite(t, w.ann.User.ID, 30*time.Second)
	w.eve.Join(t, room)
	w.eve.Send(t, room, "let me in")
	w.ann.Send(t, room, "after eve")
	h.wait(t, "after eve", func(c core.Command) bool { return c.Text == "after eve" })

	for _, c := range h.all() {
		switch {
		case c.Actor.ID == string(w.eve.User.ID), c.Place.Chat == string(spam):
			t.Errorf("a stranger's input became a command: %+v", c)
		case strings.Contains(c.Text, "notice"), strings.Contains(c.Text, "edited"):
			t.Errorf("a notice or an edit became a command: %+v", c)
		}
	}

	stop()
	w.ann.Send(t, room, "while parley was down")
	before := len(h.all())
	run(t, w.adapter(t, matrix.Options{}), h)
	h.wait(t, "sent while down", func(c core.Command) bool { return c.Text == "while parley was down" })
	if n := h.count(func(c core.Command) bool { return c.PlatformID == string(hello) }); n != 1 {
		t.Errorf("hello handed %d times across the restart, want once", n)
	}
	if got := len(h.all()); got != before+1 {
		t.Errorf("after the restart %d commands came, want only the one sent while down: %+v", got-before, h.all()[before:])
	}
}

// TestNewRoom: !new creates a room for the new session with the person
// invited; the session lives there.
func TestNewRoom(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	run(t, w.adapter(t, matrix.Options{}), h)
	room := w.ann.CreateRoom(t, "Lobby", w.bot.ID)
	h.wait(t, "the lobby's session", func(c core.Command) bool { return c.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)

	w.ann.Send(t, room, "!new Feature X")
	fresh := w.ann.WaitInvite(t, w.bot.ID, 30*time.Second)
	c := h.wait(t, "the new session", func(c core.Command) bool { return c.Kind == core.CreateSession && c.Title == "Feature X" })
	if c.Place.Chat != string(fresh) || fresh == room {
		t.Errorf("the new session is at %s, want the new room %s", c.Place.Chat, fresh)
	}
	w.ann.Join(t, fresh)
	if name := w.ann.WaitRoomName(t, fresh, func(n string) bool { return n != "" }, 30*time.Second); name != "💬 Feature X" {
		t.Errorf("new room is named %q", name)
	}
}

// TestQuestionAnswers: a question's options are answered by a reply with
// the number or the option's text, or by the number emoji; a stranger's
// reaction answers nothing.
func TestQuestionAnswers(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	a := w.adapter(t, matrix.Options{})
	run(t, a, h)
	room := w.ann.CreateRoom(t, "Choices", w.bot.ID, w.eve.User.ID)
	h.wait(t, "the session", func(c core.Command) bool { return c.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)
	w.eve.Join(t, room)

	q, err := a.Send(t.Context(), core.Place{Chat: string(room)}, core.OutMessage{Kind: core.KindQuestion, Text: "Which colour?",
		Buttons: []core.Button{{Label: "Red", Data: delivery.ButtonData("q1", 1)}, {Label: "Blue", Data: delivery.ButtonData("q1", 2)}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := id.EventID(q.ID)
	w.ann.WaitFor(t, room, func(e *event.Event) bool { return e.ID == ev }, 30*time.Second)
	w.eve.React(t, room, ev, "2️⃣")
	w.ann.Reply(t, room, ev, "2")
	w.ann.Reply(t, room, ev, "blue")
	w.ann.React(t, room, ev, "1️⃣")
	w.ann.Reply(t, room, ev, "neither, green")
	h.wait(t, "the free answer", func(c core.Command) bool { return c.Kind == core.Answer && c.Text == "neither, green" })
	var got []int
	for _, c := range h.all() {
		if c.Kind != core.Answer {
			continue
		}
		if c.QuestionID != "q1" || c.Actor.ID != string(w.ann.User.ID) {
			t.Errorf("answer %+v", c)
		}
		got = append(got, c.Option)
	}
	if want := []int{2, 2, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("options answered %v, want %v (reply 2, reply blue, reaction 1️⃣, free text)", got, want)
	}
}

// TestEncryptedRoomRefused: invited to an encrypted room, the bot says it
// cannot work there and leaves; no session starts.
func TestEncryptedRoomRefused(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	run(t, w.adapter(t, matrix.Options{}), h)
	resp, err := w.ann.Client.CreateRoom(t.Context(), &mautrix.ReqCreateRoom{Name: "Secret", Preset: "private_chat", Invite: []id.UserID{w.bot.ID},
		InitialState: []*event.Event{{Type: event.StateEncryption, StateKey: new(string),
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	room := resp.RoomID
	w.ann.WaitFor(t, room, func(e *event.Event) bool {
		return e.Sender == w.bot.ID && strings.Contains(matrixtest.Text(e), "does not support encrypted rooms")
	}, 30*time.Second)
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipLeave)
	if n := h.count(func(c core.Command) bool { return c.Kind == core.CreateSession }); n != 0 {
		t.Errorf("%d sessions started in an encrypted room", n)
	}
}

// TestFileReceived: a file comes through authenticated media under a safe
// name; one over the size limit is declined with a notice.
func TestFileReceived(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	run(t, w.adapter(t, matrix.Options{MaxFileSize: 1 << 10}), h)
	room := w.ann.CreateRoom(t, "Files", w.bot.ID)
	h.wait(t, "the session", func(c core.Command) bool { return c.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)

	w.ann.UploadFile(t, room, "../../notes.txt", "text/plain", []byte("the notes"))
	c := h.wait(t, "the file", func(c core.Command) bool { return c.Kind == core.SendMessage && len(c.Attachments) > 0 })
	att := c.Attachments[0]
	data, err := os.ReadFile(att.Path)
	if err != nil || string(data) != "the notes" || att.Name != "notes.txt" || !strings.HasPrefix(att.Path, w.files.Dir()) {
		t.Errorf("attachment %+v holds %q (%v)", att, data, err)
	}
	w.ann.UploadFile(t, room, "big.bin", "application/octet-stream", make([]byte, 4<<10))
	h.wait(t, "the refusal", func(c core.Command) bool { return c.Kind == core.Notice && strings.Contains(c.Text, "big.bin is") })
}

// TestGapBackfilled: more messages than one sync's timeline holds, sent
// while parley is down, all arrive in order after it restarts.
func TestGapBackfilled(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	stop := run(t, w.adapter(t, matrix.Options{}), h)
	room := w.ann.CreateRoom(t, "Gap", w.bot.ID)
	h.wait(t, "the session", func(c core.Command) bool { return c.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)
	w.ann.Send(t, room, "before")
	h.wait(t, "before", func(c core.Command) bool { return c.Text == "before" })
	stop()

	const n = 150 // the filter's timeline holds 100
	for i := range n {
		w.ann.Send(t, room, "m"+strconv.Itoa(i))
	}
	run(t, w.adapter(t, matrix.Options{}), h)
	h.wait(t, "the last message", func(c core.Command) bool { return c.Text == "m"+strconv.Itoa(n-1) })
	var got []string
	for _, c := range h.all() {
		if strings.HasPrefix(c.Text, "m") {
			got = append(got, c.Text)
		}
	}
	if len(got) != n {
		t.Fatalf("%d of %d messages arrived", len(got), n)
	}
	for i, text := range got {
		if text != "m"+strconv.Itoa(i) {
			t.Fatalf("message %d is %q: out of order or repeated", i, text)
		}
	}
}

// transcriber is a fake speech-to-text service.
type transcriber struct{ got chan string }

func (tr transcriber) Transcribe(_ context.Context, name string, audio []byte) (string, error) {
	tr.got <- name + ":" + string(audio)
	return "turn the lights off", nil
}

// TestVoiceTranscribed: a voice message (m.audio marked as voice) is
// fetched and transcribed, and the text is the person's message, with the
// recording attached.
func TestVoiceTranscribed(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	tr := transcriber{got: make(chan string, 1)}
	run(t, w.adapter(t, matrix.Options{Transcriber: tr}), h)
	room := w.ann.CreateRoom(t, "Voice", w.bot.ID)
	h.wait(t, "the session", func(c core.Command) bool { return c.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)

	up, err := w.ann.Client.UploadBytesWithName(t.Context(), []byte("OGG"), "audio/ogg", "Voice message.ogg")
	if err != nil {
		t.Fatal(err)
	}
	w.ann.SendContent(t, room, event.EventMessage, map[string]any{"msgtype": "m.audio", "body": "Voice message.ogg",
		"url": up.ContentURI.String(), "info": map[string]any{"mimetype": "audio/ogg", "size": 3},
		"org.matrix.msc3245.voice": map[string]any{}})
	c := h.wait(t, "the transcription", func(c core.Command) bool { return c.Kind == core.SendMessage })
	if c.Text != "turn the lights off" || len(c.Attachments) != 1 || c.Attachments[0].Mime != "audio/ogg" {
		t.Errorf("voice message became %+v", c)
	}
	if got := <-tr.got; got != "Voice message.ogg:OGG" {
		t.Errorf("transcriber got %q", got)
	}
	h.wait(t, "the transcript shown", func(c core.Command) bool {
		return c.Kind == core.Notice && c.Text == "🎤 turn the lights off" && c.Lifetime == core.LifetimeNextInput
	})
}

// TestSpace: rooms the bot creates for sessions are added to the
// configured space.
func TestSpace(t *testing.T) {
	w := newWorld(t)
	raw := w.bot.Client(t, w.hs.URL)
	sp, err := raw.CreateRoom(t.Context(), &mautrix.ReqCreateRoom{Name: "Sessions", Preset: "private_chat",
		CreationContent: map[string]any{"type": "m.space"}})
	if err != nil {
		t.Fatal(err)
	}
	a := w.adapter(t, matrix.Options{Space: string(sp.RoomID)})
	b, err := a.Bind(t.Context(), core.Session{ID: "S1", Title: "In a space", Status: core.StatusIdle})
	if err != nil {
		t.Fatal(err)
	}
	var child event.SpaceChildEventContent
	if err := raw.StateEvent(t.Context(), sp.RoomID, event.StateSpaceChild, b.Place.Chat, &child); err != nil || len(child.Via) == 0 {
		t.Errorf("the space has no child %s: %+v, %v", b.Place.Chat, child, err)
	}
	var parent event.SpaceParentEventContent
	if err := raw.StateEvent(t.Context(), id.RoomID(b.Place.Chat), event.StateSpaceParent, string(sp.RoomID), &parent); err != nil || !parent.Canonical {
		t.Errorf("the room names no parent space: %+v, %v", parent, err)
	}
}

// TestLoggedOutLogsInAgain: when the homeserver forgets the token a
// password gave (a logout elsewhere), the sync logs in again and nothing
// people write meanwhile is lost.
func TestLoggedOutLogsInAgain(t *testing.T) {
	w := newWorld(t)
	h := newHandler(w.ann.User.ID)
	a, err := matrix.New(matrix.Options{Homeserver: w.hs.URL, UserID: w.bot.ID, Password: w.bot.Password,
		Allowed: []string{string(w.ann.User.ID)}, Authorizer: admit(w.ann.User.ID), Cursors: w.store, Leases: w.store, Files: w.files, SyncTimeout: time.Second,
		HTTPClient: &http.Client{Timeout: time.Minute}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, h)
	room := w.ann.CreateRoom(t, "Relog", w.bot.ID)
	h.wait(t, "the session", func(c core.Command) bool { return c.Kind == core.CreateSession })
	joinedBy(t, w.ann, room, w.bot.ID, event.MembershipJoin)

	kept, _ := w.store.Cursor(t.Context(), "matrix.login")
	var login struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(kept), &login); err != nil || login.AccessToken == "" {
		t.Fatalf("kept login %q: %v", kept, err)
	}
	other, err := mautrix.NewClient(w.hs.URL, w.bot.ID, login.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Logout(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.ann.Send(t, room, "still there?")
	h.wait(t, "the message after the logout", func(c core.Command) bool { return c.Text == "still there?" })
	if again, _ := w.store.Cursor(t.Context(), "matrix.login"); again == kept {
		t.Error("the login kept in the store was not replaced")
	}
}

// tempFiles is a store of files in a temporary directory.
func tempFiles(tb testing.TB) *files.Store {
	tb.Helper()
	fs, err := files.New(tb.TempDir(), files.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return fs
}
