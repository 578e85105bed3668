package slack

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// Name is the adapter's name and the origin of its input.
const Name core.AdapterName = "slack"

// Options configure the adapter. Nothing in the package is global: a test
// points APIURL and HTTPClient at its own server.
type Options struct {
	// BotToken is the bot token (xoxb-…) every Web API call uses.
	BotToken string
	// AppToken is the app-level token (xapp-…) that opens Socket Mode
	// connections.
	AppToken string
	// APIURL is the Web API's base URL with its trailing slash; default
	// Slack's own. Shared files are downloaded with the bot token only
	// from Slack's https hosts or this URL's host (slack-go refuses to
	// send the token anywhere else).
	APIURL string
	// Channel is where sessions live: a top-level message there starts
	// one, /parley new posts its root there, and so do sessions started
	// elsewhere.
	Channel string
	// Events selects the Events API over HTTP (EventsHandler) instead of
	// Socket Mode; SigningSecret verifies its requests.
	Events        bool
	SigningSecret string
	// Authorizer decides whose input the adapter acts on, before it
	// fetches, creates or says anything for them; required.
	Authorizer core.Authorizer
	// Pairer, when set, says whether a stranger writing in private is
	// answered with a pairing code (core.Pair); nil sends no Pair.
	Pairer core.Pairer
	// Files keeps the copies of the files people send: a download is
	// put there and the agent handed the copy. Nil refuses received files
	// with a notice.
	Files core.FileStore
	// MaxFileSize is the largest shared file fetched (default 50 MB);
	// larger ones are refused with a notice.
	MaxFileSize int64
	// Pacer runs the calls the adapter makes itself (the root message of
	// /parley new, the edit that shows a question's answer) through
	// parley's outbox, so they are paced and wait out a 429 like every
	// other call. Nil calls Slack directly.
	Pacer core.Pacer
	// MethodPacer paces the Slack methods the adapter picks per call
	// with streaming on (stream.go: Pacing) by the limits it declares on
	// them: parley's outbox, next to Pacer. Nil calls Slack unpaced.
	MethodPacer core.MethodPacer
	// HTTPClient makes every Web API call and download; default one with
	// a 60 s timeout. The websocket is dialled separately.
	HTTPClient *http.Client
	// Dial, when set, opens the connections of the default HTTPClient
	// and of Socket Mode's websocket instead of the system's dialer.
	// Tests reach an in-memory fake Slack through it.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Stream carries the live output with Slack's streaming methods
	// (chat.startStream, appendStream, stopStream) where the workspace
	// offers them, instead of editing it with chat.update (stream.go).
	Stream bool
	// Recipients are the members a stream in a channel is addressed to
	// when nobody wrote in its thread yet (a session started elsewhere):
	// the first is used. Slack requires a recipient for streams outside
	// direct messages; without one such a thread's output is posted.
	Recipients []string
	// PingInterval is how long Socket Mode waits for Slack's websocket
	// ping before it deems the connection dead and opens another (default
	// 30 s, as slack-go).
	PingInterval time.Duration
	Logger       *slog.Logger
}

// identity is who the bot is, learned from auth.test.
type identity struct {
	UserID, BotID, TeamID, Team string
}

// Adapter is parley's Slack adapter.
type Adapter struct {
	opts Options
	api  *slack.Client
	log  *slog.Logger
	self atomic.Pointer[identity]

	// lanes run inbound work in order per conversation and concurrently
	// across conversations.
	lanes lanes
	// handled remembers the messages this process already made durable,
	// so a redelivery (Slack's retry of an envelope acked late) is acked
	// at once instead of being fetched and handled again.
	handled recent
	// clicked remembers the questions (channel and ts) a click answered
	// in this process, so that a second click — a double click — does not
	// replace the answer they show with "no longer open".
	clicked recent
	// names caches member ids' display names.
	names sync.Map
	// roots remembers, until the first status is shown, who posted the
	// root of a thread the adapter bound a session to (see status.go).
	roots sync.Map
	// rootPosted holds the roots posted for commands whose session is
	// not made yet, by the command's dedup key (see newRooted).
	rootPosted sync.Map
	// typing holds the assistant-status state (see typing.go).
	typing typingState
	// streams holds the streaming state (see stream.go).
	streams streamState
	// recv lets EventsHandler's requests into the lanes of a running Run.
	recv receiver
	// startWait is how long an events-mode request waits for Run to
	// start (startWait, the constant; tests of a stopped Run shorten it).
	startWait time.Duration
	// bg tracks work done after an acknowledgement (showing a question's
	// answer); bgCtx ends with Run.
	bg    sync.WaitGroup
	bgCtx atomic.Pointer[context.Context]
}

var (
	_ core.Adapter        = (*Adapter)(nil)
	_ core.Editor         = (*Adapter)(nil)
	_ core.Deleter        = (*Adapter)(nil)
	_ core.StatusShower   = (*Adapter)(nil)
	_ core.Binder         = (*Adapter)(nil)
	_ core.BindPlacer     = (*Adapter)(nil)
	_ core.FileSender     = (*Adapter)(nil)
	_ core.TypingNotifier = (*Adapter)(nil)
)

// New returns the adapter; nothing is sent to Slack until Check or Run.
func New(opts Options) (*Adapter, error) {
	if opts.BotToken == "" {
		return nil, errors.New("slack: no bot token (set [slack] bot_token or PARLEY_SLACK_BOT_TOKEN)")
	}
	if opts.Channel == "" {
		return nil, errors.New("slack: no channel (set [slack] channel or PARLEY_SLACK_CHANNEL)")
	}
	if opts.Authorizer == nil {
		return nil, errors.New("slack: no authorizer")
	}
	if !opts.Events && opts.AppToken == "" {
		return nil, errors.New("slack: Socket Mode needs an app-level token (set [slack] app_token or PARLEY_SLACK_APP_TOKEN)")
	}
	if opts.Events && opts.SigningSecret == "" {
		return nil, errors.New("slack: events mode needs the signing secret (set [slack] signing_secret or PARLEY_SLACK_SIGNING_SECRET)")
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = defaultMaxFile
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 60 * time.Second, Transport: dialing(opts.Dial)}
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	api := slack.New(opts.BotToken, slack.OptionAPIURL(opts.APIURL), slack.OptionAppLevelToken(opts.AppToken),
		slack.OptionHTTPClient(opts.HTTPClient), slack.OptionLog(discardLog{}))
	a := &Adapter{opts: opts, api: api, log: opts.Logger, startWait: startWait}
	a.handled.init(4096)
	a.streams.init()
	a.clicked.init(1024)
	bg := context.Background()
	a.bgCtx.Store(&bg)
	return a, nil
}

// discardLog silences slack-go's own logger (it logs only in debug mode,
// but to stderr by default).
type discardLog struct{}

func (discardLog) Output(int, string) error { return nil }

// Name implements core.Adapter.
func (a *Adapter) Name() core.AdapterName { return Name }

// Limits Slack enforces, as core counts them. chat.postMessage: about one
// message a second per channel (every thread of the channel shares it: the
// channel is Place.Chat, so it is the group's budget) and a few hundred a
// minute per workspace. chat.update and chat.delete are Tier 3, about 50 a
// minute each per workspace; showing a status edits a root (chat.update,
// counted with the edits) or swaps a reaction on it (reactions.remove is
// Tier 2, 20 a minute). assistant.threads.setStatus is Tier 3.
//
// The channel's one post a second also counts edits and status changes,
// because ops of those kinds may post: core's output op posts the turn's
// first output message (and a new one when it is gone), the turn's "Done"
// goes at edit priority, the first delivery of a session started
// elsewhere posts its root, and a renamed session whose root a person
// wrote gets a header reply. Counted only as edits, such a post would
// follow another within the second and Slack would refuse it (429). Edits
// lose little by it: the workspace's 50 a minute already keep them under
// one a second.
var limits = []core.Limit{
	{Scope: core.ScopeGroup, Kinds: []core.OpKind{core.OpSend, core.OpEdit, core.OpRename}, Rate: core.Rate{N: 1, Per: time.Second}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpSend}, Rate: core.Rate{N: 300, Per: time.Minute}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpEdit, core.OpRename}, Rate: core.Rate{N: 50, Per: time.Minute}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpRename}, Rate: core.Rate{N: 20, Per: time.Minute}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpDelete}, Rate: core.Rate{N: 50, Per: time.Minute}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpTyping}, Rate: core.Rate{N: 50, Per: time.Minute}},
}

// appendSteady spreads appends at their budget's steady rate (100 a
// minute: one every 0.6 s). Measured without it, twenty threads spent the
// minute's budget in its first seconds and then waited for it to slide:
// the stalest thread went 50 s without news.
var appendSteady = core.Rate{N: 5, Per: 3 * time.Second}

// The workspace's rate tiers of the methods that carry a streamed output,
// per method (Slack counts each method on its own).
var (
	startRate  = core.Rate{N: 20, Per: time.Minute}  // chat.startStream, Tier 2
	appendRate = core.Rate{N: 100, Per: time.Minute} // chat.appendStream, Tier 4
	stopRate   = core.Rate{N: 20, Per: time.Minute}  // chat.stopStream, Tier 2
	updateRate = core.Rate{N: 50, Per: time.Minute}  // chat.update, Tier 3
)

// postRate is chat.postMessage's limit in a channel.
var postRate = core.Rate{N: 1, Per: time.Second}

// streamLimits replace limits with streaming on. An output edit is then
// chat.appendStream (Tier 4, 100 a minute per workspace) while the text
// grows: edits are paced at that budget, and the few that take chat.update
// (rewrites, the tail past the length limit, a stream Slack ended) are kept
// within chat.update's own 50 a minute by its limit on the method, as are
// renames, which share it. Edits leave the channel's one call a second to
// posts and status changes: an append posts nothing, and the one edit that
// may post — the output message gone, sent anew — is held to the channel's
// second by chat.postMessage's limit on the method (a.post). That lets
// threads of one channel stream at appendStream's budget instead of the
// channel's second.
//
// The limits on methods count the calls the adapter asks the outbox for
// (stream.go: Pacing): every method an output edit may become, each at its
// own budget.
var streamLimits = []core.Limit{
	{Scope: core.ScopeGroup, Kinds: []core.OpKind{core.OpSend, core.OpRename}, Rate: core.Rate{N: 1, Per: time.Second}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpSend}, Rate: core.Rate{N: 300, Per: time.Minute}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpEdit}, Rate: appendRate},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpEdit}, Rate: appendSteady},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpRename}, Rate: updateRate},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpRename}, Rate: core.Rate{N: 20, Per: time.Minute}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpDelete}, Rate: core.Rate{N: 50, Per: time.Minute}},
	{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpTyping}, Rate: core.Rate{N: 50, Per: time.Minute}},
	{Scope: core.ScopeGroup, Methods: []string{"chat.postMessage"}, Rate: postRate},
	{Scope: core.ScopeAccount, Methods: []string{"chat.startStream"}, Rate: startRate},
	{Scope: core.ScopeAccount, Methods: []string{"chat.appendStream"}, Rate: appendRate},
	{Scope: core.ScopeAccount, Methods: []string{"chat.stopStream"}, Rate: stopRate},
	{Scope: core.ScopeAccount, Methods: []string{"chat.update"}, Rate: updateRate},
}

func (a *Adapter) limits() []core.Limit { return limitsFor(a.opts.Stream) }

// limitsFor are the limits the adapter declares with streaming on or off.
func limitsFor(stream bool) []core.Limit {
	if stream {
		return streamLimits
	}
	return limits
}

// editInterval is how often one output message is edited: with streaming
// on, every second — appends cost little of their budget, and the
// channel's one call a second bounds them anyway.
func (a *Adapter) editInterval() time.Duration {
	if a.opts.Stream {
		return streamEditInterval
	}
	return editInterval
}

const (
	// streamEditInterval: see editInterval.
	streamEditInterval = time.Second
	// maxMarkdown is Slack's limit for the markdown blocks of one message
	// (12,000 characters), counted in bytes, which are never fewer than
	// characters however Slack counts them.
	maxMarkdown = 12000
	// fileThreshold: a final output longer than three messages goes as a
	// file.
	fileThreshold = 3 * maxMarkdown
	// editInterval: one output message is edited at most every two
	// seconds, so a stream takes about 30 of the workspace's 50
	// chat.update calls a minute and leaves room for others.
	editInterval = 2 * time.Second
	// defaultMaxFile bounds the shared files fetched.
	defaultMaxFile = 50 << 20
)

// Capabilities implements core.Adapter. Messages carry the agent's
// markdown in a markdown block, which Slack renders itself, so the length
// is that of the markdown sent.
func (a *Adapter) Capabilities() core.Capabilities {
	return core.Capabilities{
		MaxLength:     maxMarkdown,
		LengthUnit:    core.Bytes,
		Markup:        core.MarkupMarkdown,
		FileThreshold: fileThreshold,
		DeleteOthers:  false, // bots delete only their own messages
		Buttons:       true,
		Limits:        a.limits(),
		EditInterval:  a.editInterval(),
	}
}

// BindPlace implements core.BindPlacer: roots for sessions started
// elsewhere are posted in the channel, against its budget.
func (a *Adapter) BindPlace() core.Place { return core.Place{Chat: a.opts.Channel} }

// ref is a reference to the message ts at p.
func ref(p core.Place, ts string) core.MessageRef {
	return core.MessageRef{Adapter: Name, Place: p, ID: ts}
}

// background runs f after an acknowledgement, with a context that ends
// when Run does.
func (a *Adapter) background(f func(ctx context.Context)) {
	ctx := *a.bgCtx.Load()
	a.bg.Go(func() { f(ctx) })
}

// dialing is net/http's default transport, dialing with dial when it is
// set; nil (the client's default) otherwise.
func dialing(dial func(ctx context.Context, network, address string) (net.Conn, error)) http.RoundTripper {
	if dial == nil {
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = dial
	return t
}
