package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/core"
)

// Name is the adapter's name and the origin of its input.
const Name core.AdapterName = "telegram"

// Cursors is where the adapter keeps its positions across restarts (the
// update offset, whether the server speaks rich messages). core.Store
// implements it.
type Cursors interface {
	Cursor(ctx context.Context, name string) (string, error)
	SetCursor(ctx context.Context, name, value string) error
}

// Transcriber turns a voice note into text.
type Transcriber interface {
	Transcribe(ctx context.Context, name string, audio []byte) (string, error)
}

// Options configure the adapter.
type Options struct {
	Token string
	// APIURL is the Bot API server (a self-hosted one, or a test server).
	APIURL string
	// ChatID is the forum supergroup where sessions get their topics;
	// zero means private chats only.
	ChatID int64
	// Webhook mode instead of long polling: updates arrive on
	// WebhookHandler with WebhookSecret in their header.
	Webhook       bool
	WebhookURL    string
	WebhookSecret string
	// NewFromGeneral makes a message in the General topic start a session
	// in a new topic; otherwise the General topic only explains /new.
	NewFromGeneral bool
	// Files keeps the copies of the files people send: a download is
	// put there and the agent handed the copy. Nil refuses received files
	// with a notice.
	Files core.FileStore
	// Cursors persist the update offset; required.
	Cursors Cursors
	// Leases give the long poll to one instance among those sharing the
	// store (see Run); required in long-polling mode, unused with a
	// webhook. It must be the store Cursors is: the offset is read from
	// Cursors and written through Leases.SetCursorFenced.
	Leases core.Leaser
	// Authorizer decides whose input the adapter acts on, before it
	// creates a topic, fetches a file or says anything; required.
	Authorizer core.Authorizer
	// Pairer, when set, says whether a stranger writing in private is
	// answered with a pairing code (core.Pair); nil sends no Pair.
	Pairer core.Pairer
	// Transcriber, when set, turns voice notes into text.
	Transcriber Transcriber
	// Pacer runs the calls the adapter makes itself (creating a topic for
	// /new) through parley's outbox, so they wait out a 429 like every
	// other call to the group. Nil calls the platform directly.
	Pacer core.Pacer
	// PollTimeout is the long-polling timeout (default 30s).
	PollTimeout time.Duration
	HTTPClient  *http.Client
	// Dial, when HTTPClient is nil, opens the default client's
	// connections instead of the system's dialer. Tests reach an
	// in-memory fake Bot API through it.
	Dial   func(ctx context.Context, network, address string) (net.Conn, error)
	Logger *slog.Logger
}

// rich support, as learned from the server.
const (
	richUnknown int32 = iota
	richYes
	richNo
)

// Limits Telegram enforces, as it counts them: about one message a second
// per chat — a supergroup and all its topics together, so the scope is the
// group, not the topic — and 20 a minute in a group (in bursts: the minute
// is a sliding window), 30 calls a second per bot. Edits, deletions and
// topic renames count as messages. A lone session may spend both group
// budgets in bursts; sessions that compete for them are served in turn by
// the outbox. Chat actions (typing) are not messages and count only
// against the bot's budget; like everything else they wait out a 429's
// retry_after. A private chat is a group of its own here; Telegram does
// not limit it to 20 a minute, so pacing it so is merely cautious.
var limits = []core.Limit{
	{Scope: core.ScopeGroup, Kinds: messageOps, Rate: core.Rate{N: 1, Per: time.Second}},
	{Scope: core.ScopeGroup, Kinds: messageOps, Rate: core.Rate{N: 20, Per: time.Minute}},
	{Scope: core.ScopeAccount, Rate: core.Rate{N: 30, Per: time.Second}},
}

// messageOps are the operations Telegram counts as messages in a chat.
var messageOps = []core.OpKind{core.OpSend, core.OpEdit, core.OpDelete, core.OpRename}

// Length limits: 4096 UTF-16 units of visible text in HTML mode, which
// core measures after rendering through RenderedLength (the adapter is a
// core.Measurer), so no margin for what rendering adds is needed; rich
// messages take about 32k characters.
const (
	maxHTML = 4096
	maxRich = 30000
	// fileThreshold: a final output longer than this goes as a document.
	fileThreshold = 3 * maxRich
)

// Adapter is parley's Telegram adapter.
type Adapter struct {
	opts Options
	bot  *bot.Bot
	log  *slog.Logger
	rich atomic.Int32
	me   atomic.Pointer[models.User]

	// topicMu serialises topic creation: createForumTopic is not
	// idempotent.
	topicMu sync.Mutex
	// webhook updates, when in webhook mode.
	hooks chan hookUpdate
}

var (
	_ core.Adapter        = (*Adapter)(nil)
	_ core.Editor         = (*Adapter)(nil)
	_ core.Deleter        = (*Adapter)(nil)
	_ core.StatusShower   = (*Adapter)(nil)
	_ core.Measurer       = (*Adapter)(nil)
	_ core.Binder         = (*Adapter)(nil)
	_ core.FileSender     = (*Adapter)(nil)
	_ core.TypingNotifier = (*Adapter)(nil)
	_ core.BindPlacer     = (*Adapter)(nil)
)

// New returns the adapter; nothing is sent to Telegram until Check or Run.
func New(opts Options) (*Adapter, error) {
	if opts.Token == "" {
		return nil, errors.New("telegram: no token (set [telegram] token or PARLEY_TELEGRAM_TOKEN)")
	}
	if opts.Cursors == nil {
		return nil, errors.New("telegram: no cursor store")
	}
	if opts.Authorizer == nil {
		return nil, errors.New("telegram: no authorizer")
	}
	if !opts.Webhook && opts.Leases == nil {
		return nil, errors.New("telegram: no lease store (long polling needs one)")
	}
	if opts.Webhook && opts.WebhookSecret == "" {
		return nil, errors.New("telegram: webhook mode needs a secret token (set [telegram] webhook_secret or PARLEY_TELEGRAM_WEBHOOK_SECRET, e.g. to the output of `openssl rand -hex 32`)")
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 30 * time.Second
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: opts.PollTimeout + 15*time.Second, Transport: dialing(opts.Dial)}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	bopts := []bot.Option{bot.WithSkipGetMe(), bot.WithHTTPClient(opts.PollTimeout, opts.HTTPClient)}
	if opts.APIURL != "" {
		bopts = append(bopts, bot.WithServerURL(opts.APIURL))
	}
	b, err := bot.New(opts.Token, bopts...)
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	return &Adapter{opts: opts, bot: b, log: opts.Logger, hooks: make(chan hookUpdate)}, nil
}

// MarkupHTML is the dialect of Telegram's parse_mode HTML, which the
// adapter renders the agent's markdown into (unless rich messages are on).
const MarkupHTML core.Markup = "telegram_html"

// Name implements core.Adapter.
func (a *Adapter) Name() core.AdapterName { return Name }

// Capabilities implements core.Adapter. The length limit grows once the
// server has shown it speaks rich messages.
func (a *Adapter) Capabilities() core.Capabilities {
	c := core.Capabilities{
		MaxLength:     maxHTML,
		LengthUnit:    core.UTF16,
		Markup:        MarkupHTML,
		FileThreshold: fileThreshold,
		DeleteOthers:  true,
		Buttons:       true,
		Limits:        limits,
	}
	if a.rich.Load() == richYes {
		c.MaxLength, c.Markup = maxRich, core.MarkupMarkdown
	}
	return c
}

// Check verifies the configuration against Telegram and prepares the chat:
// the token works, the group is a forum where the bot may manage topics and
// delete messages, and the commands are registered. Its errors say what to
// fix. Telegram's refusals (the token, the chat, the bot's rights) are
// core.Permanent, so the daemon retries them slowly; a Bot API that does
// not answer, or fails on its side, is not.
func (a *Adapter) Check(ctx context.Context) error {
	me, err := a.bot.GetMe(ctx)
	if err != nil {
		if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
			return core.Permanent(fmt.Errorf("telegram: the token was refused: check [telegram] token (PARLEY_TELEGRAM_TOKEN) against @BotFather: %w", err))
		}
		return core.WithFix(fmt.Errorf("telegram: cannot reach the Bot API at %s: %w", a.apiURL(), err),
			"check that this machine reaches "+a.apiURL()+" (its network, DNS, firewall, an HTTPS_PROXY it needs), or correct [telegram] api_url (PARLEY_TELEGRAM_API_URL); parley serve keeps serving without Telegram and tries again")
	}
	a.me.Store(me)
	if v, err := a.opts.Cursors.Cursor(ctx, cursorRich); err == nil {
		switch v {
		case "yes":
			a.rich.Store(richYes)
		case "no":
			a.rich.Store(richNo)
		}
	}
	a.probeRich(ctx)
	if a.opts.ChatID != 0 {
		chat, err := a.bot.GetChat(ctx, &bot.GetChatParams{ChatID: a.opts.ChatID})
		if err != nil {
			return refusal(fmt.Errorf("telegram: chat %d: add the bot to the group and check [telegram] chat_id: %w", a.opts.ChatID, err))
		}
		if !chat.IsForum {
			return core.Permanent(fmt.Errorf("telegram: chat %d has no topics: enable Topics in the group's settings (parley gives every session a topic)", a.opts.ChatID))
		}
		member, err := a.bot.GetChatMember(ctx, &bot.GetChatMemberParams{ChatID: a.opts.ChatID, UserID: me.ID})
		if err != nil {
			return core.WithFix(refusal(fmt.Errorf("telegram: rights in chat %d: %w", a.opts.ChatID, err)),
				fmt.Sprintf("add the bot to chat %d as an administrator with the rights \"Manage topics\" and \"Delete messages\"", a.opts.ChatID))
		}
		if member.Administrator == nil || !member.Administrator.CanManageTopics || !member.Administrator.CanDeleteMessages {
			return core.Permanent(fmt.Errorf("telegram: the bot must be an administrator of chat %d with the rights \"Manage topics\" and \"Delete messages\"", a.opts.ChatID))
		}
	}
	if err := a.registerCommands(ctx); err != nil {
		a.log.Warn("could not register the command list", "err", err)
	}
	return nil
}

// refusal marks err permanent when Telegram answered it with a refusal
// (4xx): retrying soon cannot help. Network errors and 5xx stay transient.
func refusal(err error) error {
	if errors.Is(err, bot.ErrorBadRequest) || errors.Is(err, bot.ErrorForbidden) ||
		errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
		return core.Permanent(err)
	}
	return err
}

// apiURL is the Bot API server parley calls.
func (a *Adapter) apiURL() string {
	if a.opts.APIURL == "" {
		return "https://api.telegram.org"
	}
	return a.opts.APIURL
}

func chatID(p core.Place) (int64, error) {
	id, err := strconv.ParseInt(p.Chat, 10, 64)
	if err != nil {
		return 0, core.Permanent(fmt.Errorf("telegram: bad chat id %q", p.Chat))
	}
	return id, nil
}

func threadID(p core.Place) int {
	id, _ := strconv.Atoi(p.Thread)
	return id
}

func place(chat int64, thread int) core.Place {
	p := core.Place{Chat: strconv.FormatInt(chat, 10)}
	if thread != 0 {
		p.Thread = strconv.Itoa(thread)
	}
	return p
}

func ref(p core.Place, id int) core.MessageRef {
	return core.MessageRef{Adapter: Name, Place: p, ID: strconv.Itoa(id)}
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
