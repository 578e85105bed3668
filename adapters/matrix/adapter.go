package matrix

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/core"
)

// Name is the adapter's name and the origin of its input.
const Name core.AdapterName = "matrix"

// Cursors is where the adapter keeps what must survive a restart: the sync
// position, the filter id, and the login a password gave. core.Store
// implements it.
type Cursors interface {
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
}

// Transcriber turns a voice message into text.
type Transcriber interface {
	Transcribe(ctx context.Context, name string, audio []byte) (string, error)
}

// Options configure the adapter. Nothing in the package is global: a test
// points Homeserver at its own server.
type Options struct {
	// Homeserver is the client-server API's base URL.
	Homeserver string
	// UserID is the bot's full Matrix id.
	UserID id.UserID
	// AccessToken is used as it is; without it, Password logs in once and
	// the token and device id are kept in Cursors.
	AccessToken string
	Password    string
	// Allowed are the Matrix ids whose invites the bot follows and whom it
	// invites to the rooms it creates. Whose input is accepted is
	// Authorizer's decision, made from the same list.
	Allowed []string
	// Authorizer decides whose input the adapter acts on, before it joins,
	// creates or fetches anything for them; required.
	Authorizer core.Authorizer
	// Space, when set, is the space (room id or alias) the rooms the bot
	// creates are added to.
	Space string
	// Cursors persist the sync position, the filter and a password's
	// login; required.
	Cursors Cursors
	// Leases give the sync to one instance among those sharing the store
	// (see Run); required. It must be the store Cursors is: the position
	// and the filter are read from Cursors and written through
	// Leases.SetCursorFenced.
	Leases core.Leaser
	// Files keeps the copies of the files people send: a download is
	// put there and the agent handed the copy. Nil refuses received files
	// with a notice.
	Files core.FileStore
	// MaxFileSize is the largest file fetched (default 50 MB); larger
	// ones are refused with a notice.
	MaxFileSize int64
	// Transcriber, when set, turns voice messages into text.
	Transcriber Transcriber
	// Pacer runs the calls the adapter makes itself (the room !new
	// creates) through parley's outbox. Nil calls the homeserver directly.
	Pacer core.Pacer
	// HTTPClient makes every call; default one with a two-minute timeout
	// (a sync long-polls for SyncTimeout, a download takes up to two
	// minutes), which is also given to a client that sets none, so that
	// no call is without a deadline.
	HTTPClient *http.Client
	// SyncTimeout is how long one /sync waits for events (default 30 s).
	SyncTimeout time.Duration
	// MessageRate is where the account's message budget starts; the
	// outbox then learns the homeserver's (see Capabilities). The zero
	// Rate means Synapse's default.
	MessageRate core.Rate
	Logger      *slog.Logger
}

// Adapter is parley's Matrix adapter.
type Adapter struct {
	opts Options
	cli  *mautrix.Client
	log  *slog.Logger
	// ready is set once Check has logged in and learnt the server.
	ready atomic.Bool
	// token is the access token every request carries (see authTransport).
	token atomic.Pointer[string]
	// power caches, per room, whether the bot may redact others' events
	// (see cleanup.go).
	power sync.Map // id.RoomID → powers
	// asked holds the rooms already told that the bot lacks the power to
	// show the status there (see ShowStatus).
	asked sync.Map // id.RoomID → struct{}
	// typed remembers when each room's typing indicator was last set, so
	// renewals more frequent than it lasts make no call.
	typedMu sync.Mutex
	typed   map[id.RoomID]time.Time
	// now is the clock for typing renewals (tests replace it).
	now func() time.Time
	// legacyMedia is set once the homeserver answered that it has no
	// authenticated media (see download).
	legacyMedia atomic.Bool
	// echo remembers the bot's own events the sync showed, by
	// transaction id, so that a replayed keyed send is not posted twice
	// (see echo.go).
	echo *echoes
}

var (
	_ core.Adapter        = (*Adapter)(nil)
	_ core.Editor         = (*Adapter)(nil)
	_ core.Deleter        = (*Adapter)(nil)
	_ core.StatusShower   = (*Adapter)(nil)
	_ core.Binder         = (*Adapter)(nil)
	_ core.BindPlacer     = (*Adapter)(nil)
	_ core.Measurer       = (*Adapter)(nil)
	_ core.TypingNotifier = (*Adapter)(nil)
)

// New returns the adapter; nothing is sent to the homeserver until Check
// or Run.
func New(opts Options) (*Adapter, error) {
	switch {
	case opts.Homeserver == "":
		return nil, errors.New("matrix: no homeserver (set [matrix] homeserver or PARLEY_MATRIX_HOMESERVER)")
	case opts.UserID == "":
		return nil, errors.New("matrix: no user id (set [matrix] user_id or PARLEY_MATRIX_USER_ID)")
	case opts.AccessToken == "" && opts.Password == "":
		return nil, errors.New("matrix: no access token or password (set PARLEY_MATRIX_ACCESS_TOKEN or PARLEY_MATRIX_PASSWORD)")
	case opts.Cursors == nil:
		return nil, errors.New("matrix: no cursor store")
	case opts.Authorizer == nil:
		return nil, errors.New("matrix: no authorizer")
	case opts.Leases == nil:
		return nil, errors.New("matrix: no lease store (the sync needs one)")
	}
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = defaultMaxFile
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: callTimeout}
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 30 * time.Second
	}
	if opts.MessageRate.Unlimited() {
		opts.MessageRate = synapseRate
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cli, err := mautrix.NewClient(opts.Homeserver, opts.UserID, opts.AccessToken)
	if err != nil {
		return nil, err
	}
	// The token goes on every request by the transport, from an atomic
	// value, so that a login during Run (a token the homeserver forgot)
	// replaces it without racing the calls in flight; the client itself
	// holds none.
	a := &Adapter{opts: opts, log: opts.Logger, typed: map[id.RoomID]time.Time{}, now: time.Now, echo: newEchoes()}
	a.token.Store(new(opts.AccessToken))
	hc := *opts.HTTPClient
	if hc.Timeout <= 0 {
		hc.Timeout = callTimeout
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = &authTransport{next: next, host: cli.HomeserverURL.Host, token: &a.token}
	if opts.AccessToken == "" {
		hc.Transport.(*authTransport).refused = a.adoptStored
	}
	cli.Client = &hc
	cli.AccessToken = ""
	// The outbox retries, paces and waits out 429s for the whole account;
	// the library must not retry behind its back.
	cli.DefaultHTTPRetries = 0
	cli.IgnoreRateLimit = true
	a.cli = cli
	return a, nil
}

// authTransport puts the bot's access token on requests to the homeserver
// (and only there), except a login, which must not carry a token the
// homeserver may have forgotten.
type authTransport struct {
	next  http.RoundTripper
	host  string
	token *atomic.Pointer[string]
	// refused, when set (a password's login), is told of a token the
	// homeserver refused (401), so that an instance that does not sync
	// takes the token another instance's new login stored.
	refused func(tok string)
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok := *t.token.Load()
	if tok == "" || req.URL.Host != t.host || req.Header.Get("Authorization") != "" || strings.HasSuffix(req.URL.Path, "/login") {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && t.refused != nil {
		t.refused(tok)
	}
	return resp, err
}

// MarkupHTML is the dialect of a Matrix event's formatted_body
// (org.matrix.custom.html), which the adapter renders the agent's markdown
// into.
const MarkupHTML core.Markup = "matrix_html"

// Name implements core.Adapter.
func (a *Adapter) Name() core.AdapterName { return Name }

// maxEventRate is the most events the account sends, however much the
// homeserver allows: ten a second, within Dendrite's default limiter (20
// requests per 500 ms) and far above what people can follow.
var maxEventRate = core.Rate{N: 10, Per: time.Second}

const (
	// learnEvery: a budget the bot waits for grows every two seconds while
	// the homeserver never limited it, so that against a homeserver
	// without limits a stream edits once a second within 10 s.
	learnEvery = 2 * time.Second
	// sendShare is the share of the budget kept for new messages.
	sendShare = 0.25
)

// synapseRate keeps within Synapse's default rc_message (0.2 events a
// second with bursts of 10) as a sliding window of half the burst (see
// Config.rate): never more than its bucket allows, the same long-run rate.
var synapseRate = core.Rate{N: 5, Per: 25 * time.Second}

const (
	// maxLength bounds each of the body and the formatted_body of one
	// message (see RenderedLength). An event may hold 65,536 bytes with its
	// envelope; the pair is at most 32,000 bytes, an edit adds only a short
	// fallback, and content that JSON escapes would still push over the
	// limit drops its HTML rather than fail (see encode).
	maxLength = 16000
	// editInterval: every edit is an event the homeserver stores and
	// every client syncs, so one output message is edited at most once a
	// second, however much the homeserver allows — a pace people can
	// read. Under a tighter budget the outbox spreads a message's edits
	// at the budget's steady rate (Synapse's default: every 5 s).
	editInterval = time.Second
	// callTimeout bounds every call to the homeserver that has no nearer
	// deadline (the outbox gives its own to the calls it makes).
	callTimeout = 2 * time.Minute
	// eventTimeout bounds the handling of one event from a sync: its
	// calls, a download and a transcription. It runs again after it.
	eventTimeout = 5 * time.Minute
	// defaultMaxFile bounds the files fetched.
	defaultMaxFile = 50 << 20
)

// Capabilities implements core.Adapter. Homeservers limit events per
// account, not per room: every message, edit, room name and redaction
// counts against one budget. It starts at MessageRate and is learned
// (core.Learn): it grows while the homeserver never answers
// M_LIMIT_EXCEEDED, up to maxEventRate, and drops to what the homeserver
// accepted when it does. A quarter of it is kept for new messages
// (answers, notices, questions), which never wait behind the edits of a
// streaming output. Typing notifications are ephemeral and not counted by
// Synapse's rc_message; they are kept to a modest rate of their own.
func (a *Adapter) Capabilities() core.Capabilities {
	return core.Capabilities{
		MaxLength:     maxLength,
		LengthUnit:    core.Bytes,
		Markup:        MarkupHTML,
		FileThreshold: 0,    // long outputs go as continuation messages
		DeleteOthers:  true, // where the bot's power level allows it; see Delete
		Buttons:       true, // shown as numbered options answered by number or reaction
		Limits:        limitsFor(a.opts.MessageRate),
		EditInterval:  editInterval,
	}
}

// limitsFor are the limits the adapter declares for an account whose
// message budget starts at rate (synapseRate when unset).
func limitsFor(rate core.Rate) []core.Limit {
	if rate.Unlimited() {
		rate = synapseRate
	}
	return []core.Limit{
		{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpSend, core.OpEdit, core.OpRename, core.OpDelete}, Rate: rate,
			Learn: &core.Learn{Max: maxEventRate, Every: learnEvery}, SendShare: sendShare},
		{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpTyping}, Rate: core.Rate{N: 30, Per: time.Minute}},
	}
}

// BindPlace implements core.BindPlacer: creating a room counts against the
// account's budget, which the zero Place is paced by.
func (a *Adapter) BindPlace() core.Place { return core.Place{} }

// ref is a reference to event ev in room.
func ref(room id.RoomID, ev id.EventID) core.MessageRef {
	return core.MessageRef{Adapter: Name, Place: core.Place{Chat: string(room)}, ID: string(ev)}
}

// place is room's Place.
func place(room id.RoomID) core.Place { return core.Place{Chat: string(room)} }
