package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/postgres"
)

// Deadlines of the checks that talk to servers: each is bounded, so a
// server that never answers is a finding, not a hung doctor.
const (
	probeTimeout    = 5 * time.Second  // /api/health, the transcription endpoint
	platformTimeout = 30 * time.Second // one platform's build and Check
	mcpTimeout      = 15 * time.Second // initialize and tools/list
)

// checkup runs the checks of a valid configuration: doctor runs them all,
// serve the ones that need no platform (preflight) before it starts.
type checkup struct {
	cfg   config.Config
	table []platform.Platform
	// serving is set by serve: a parley already on the address or the
	// data directory is then in the way, not a finding to report as fine.
	serving bool
	// lockTimeout bounds the wait for the database's lock; zero is bolt's
	// default.
	lockTimeout time.Duration
	// env is the environment doctor was given, the agent's is made from:
	// the agent check runs its command as the orchestrator would.
	env []string
	// agentTimeout bounds each command of the agent check; zero is
	// agentTimeout (an ACP agent's start and initialize: acpProbeTimeout).
	agentTimeout time.Duration
	// now is the backup check's clock; nil is time.Now.
	now func() time.Time

	// running is learnt by checkListen: a parley answers /api/health at
	// the listen address; reported is what it says of its platforms.
	running  bool
	reported map[string]platformReport
	// storeFree is learnt by checkDataDir: the data directory's database
	// exists and no other process holds it, so the platforms' checks may
	// use it as serve's do. storeReady is learnt by checkStore: the
	// database of [store] url answers with this parley's schema, and
	// serves the platforms' checks instead.
	storeFree  bool
	storeReady bool
}

// run runs every check. The listen address is probed first, since whether
// a parley runs there decides what the data directory's lock means and
// whether MCP can be tried; it is reported after the data directory.
func (c *checkup) run(ctx context.Context) []finding {
	listen := c.checkListen(ctx)
	out := []finding{c.checkDataDir()}
	if c.cfg.Store.URL != "" {
		out = append(out, c.checkStore(ctx))
	}
	if c.cfg.Store.BackupDir != "" {
		out = append(out, c.checkBackups())
	}
	out = append(out, listen)
	out = append(out, c.checkPlatforms(ctx)...)
	out = append(out, c.checkReported()...)
	if c.cfg.Transcription.Enabled() {
		out = append(out, c.checkTranscription(ctx))
	}
	out = append(out, c.checkAgents(ctx)...)
	return append(out, c.checkMCP(ctx))
}

// platformReport is a platform's status as a running parley's /api/health
// reports it (adapters/web/health.go).
type platformReport struct {
	Up        bool               `json:"up"`
	Error     core.PlatformState `json:"error"`
	Since     time.Time          `json:"since"`
	NextRetry time.Time          `json:"next_retry"`
}

// checkReported turns each platform the running parley reports down into
// a finding: the checks above were made from here, this is what that
// parley lives with.
func (c *checkup) checkReported() []finding {
	var out []finding
	for _, row := range c.table {
		name := string(row.Name)
		r, ok := c.reported[name]
		if !ok || r.Up {
			continue
		}
		problem := fmt.Sprintf("the parley serving %s reports %s down", c.cfg.HTTP.Listen, name)
		if !r.Since.IsZero() {
			problem += " since " + r.Since.Local().Format(time.DateTime)
		}
		if r.Error != "" {
			problem += " (" + string(r.Error) + ")"
		}
		if !r.NextRetry.IsZero() {
			problem += "; it tries again at " + r.NextRetry.Local().Format(time.DateTime)
		}
		var fix string
		switch r.Error {
		case core.PlatformStarting:
			fix = "wait a few seconds and run parley doctor again"
		case core.PlatformRefused:
			fix = fmt.Sprintf("%s refused parley's configuration: do what the %s finding above (or that parley's log) says; a fix on %s's side is picked up at the next try, a change to the configuration needs a restart of parley serve", name, name, name)
		default:
			fix = fmt.Sprintf("check that the machine parley runs on reaches %s (network, DNS, proxy); if the %s finding above passed, it is back: that parley picks it up at its next try, or restart it", name, name)
		}
		out = append(out, finding{Check: name, Problem: problem, Fix: fix})
	}
	return out
}

// preflight is what serve checks before it opens anything: the listen
// address, the data directory and the transcription endpoint. The
// platforms are not: a platform that is down takes only itself down, and
// the daemon starts each with the Check doctor runs, retried until it
// passes.
func (c *checkup) preflight(ctx context.Context) []finding {
	listen := c.checkListen(ctx)
	out := []finding{c.checkDataDir()}
	if c.cfg.Store.URL != "" {
		out = append(out, c.checkStore(ctx))
	}
	out = append(out, listen)
	if c.cfg.Transcription.Enabled() {
		out = append(out, c.checkTranscription(ctx))
	}
	return out
}

const dataDirFix = "set data_dir (PARLEY_DATA_DIR) to a directory the user parley runs as can write"

// checkDataDir checks that the data directory exists or can be created,
// that it is writable, and that its database is free, not of a newer
// schema, and not damaged: bolt.Open looks at its header pages, and, for
// doctor but not for serve, Store.Check reads every page (30 ms for a
// file of 100,000 sessions in the page cache). It creates nothing but a probe file it removes at
// once.
func (c *checkup) checkDataDir() finding {
	const check = "data_dir"
	dir := c.cfg.DataDir
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		parent := filepath.Dir(dir)
		for {
			if _, err := os.Stat(parent); err == nil || parent == filepath.Dir(parent) {
				break
			}
			parent = filepath.Dir(parent)
		}
		if err := probeWrite(parent); err != nil {
			return finding{Check: check, Problem: fmt.Sprintf("%s does not exist, and cannot be created: %v", dir, err),
				Fix: fmt.Sprintf("create it (mkdir -p %s) owned by the user parley runs as, or %s", dir, dataDirFix)}
		}
		return finding{Check: check, OK: true, Detail: dir + " does not exist yet; parley serve creates it"}
	case err != nil:
		return finding{Check: check, Problem: err.Error(), Fix: dataDirFix}
	case !info.IsDir():
		return finding{Check: check, Problem: dir + " is not a directory", Fix: dataDirFix}
	}
	if err := probeWrite(dir); err != nil {
		return finding{Check: check, Problem: fmt.Sprintf("%s is not writable: %v", dir, err),
			Fix: fmt.Sprintf("make it the parley user's (chown -R USER %s), or %s", dir, dataDirFix)}
	}
	db := filepath.Join(dir, daemon.DBFile)
	_, err = os.Stat(db)
	if c.cfg.Store.URL != "" {
		// The state is in PostgreSQL (the store check); the directory
		// holds files only.
		detail := dir + " is writable; it holds files, the state is in the database of [store] url"
		if err == nil {
			detail += " (its " + daemon.DBFile + " is not used: parley migrate --from " + dir + " copies it into an empty database)"
		}
		return finding{Check: check, OK: true, Detail: detail}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return finding{Check: check, OK: true, Detail: dir + " is writable; no database yet (parley serve creates it)"}
	}
	st, err := bolt.Open(db, bolt.Options{LockTimeout: c.lockTimeout})
	var damaged *bolt.DamagedError
	switch {
	case errors.As(err, &damaged):
		return finding{Check: check, Problem: damaged.Problem(), Fix: damaged.Fix()}
	case errors.Is(err, bolt.ErrInUse) && c.running && !c.serving:
		return finding{Check: check, OK: true, Detail: dir + " is in use by the parley serving " + c.cfg.HTTP.Listen}
	case errors.Is(err, bolt.ErrInUse):
		return finding{Check: check, Problem: "another parley is using " + dir,
			Fix: "stop it, or give this one another data directory (data_dir, PARLEY_DATA_DIR)"}
	case errors.Is(err, core.ErrSchemaTooNew):
		return finding{Check: check, Problem: fmt.Sprintf("%s was written by a newer parley: %v", db, err),
			Fix: "run that parley (or a newer one), or set data_dir (PARLEY_DATA_DIR) to another directory; do not edit the file"}
	case err != nil:
		return finding{Check: check, Problem: fmt.Sprintf("cannot open %s: %v", db, err),
			Fix: "check its owner and permissions; if it is damaged, restore it from a backup, or move it away to start afresh"}
	}
	// Open looked at the header pages only; doctor reads every page, as
	// serve (which must start quickly) does not.
	if !c.serving {
		if err := st.Check(context.Background()); errors.As(err, &damaged) {
			_ = st.Close()
			return finding{Check: check, Problem: damaged.Problem(), Fix: damaged.Fix()}
		} else if err != nil {
			_ = st.Close()
			return finding{Check: check, Problem: fmt.Sprintf("cannot check %s: %v", db, err),
				Fix: "run parley doctor again while parley is stopped; if it fails the same way, restore the file from a backup"}
		}
	}
	_ = st.Close()
	c.storeFree = true
	return finding{Check: check, OK: true, Detail: fmt.Sprintf("%s is writable; its database opens and is sound (schema version %d or older)", dir, bolt.SchemaVersion)}
}

// probeWrite creates and removes a file in dir.
func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".parley-doctor-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// checkListen checks that the listen address can be bound or, when it is
// taken, whether a parley serves it (its /api/health answers), which sets
// c.running.
func (c *checkup) checkListen(ctx context.Context) finding {
	const check = "listen"
	addr := c.cfg.HTTP.Listen
	fix := "set [http] listen (PARLEY_HTTP_LISTEN or --listen) to a free address, such as 127.0.0.1:8766"
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		return finding{Check: check, OK: true, Detail: addr + " is free: parley serve can listen there"}
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
	case errors.Is(err, syscall.EACCES):
		return finding{Check: check, Problem: fmt.Sprintf("listening on %s is not permitted: %v", addr, err),
			Fix: "use a port above 1023 (ports below need privileges), or " + fix}
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return finding{Check: check, Problem: fmt.Sprintf("%s is not an address of this machine: %v", addr, err),
			Fix: "use one of its addresses (127.0.0.1 for this machine only): " + fix}
	default:
		return finding{Check: check, Problem: fmt.Sprintf("cannot listen on %s: %v", addr, err), Fix: fix}
	}
	ok, status, reported := c.health(ctx, addr)
	switch {
	case ok && c.serving:
		c.running = true
		return finding{Check: check, Problem: "a parley is already serving " + addr,
			Fix: "stop it first, or " + fix}
	case ok:
		c.running, c.reported = true, reported
		return finding{Check: check, OK: true, Detail: addr + " is served by a running parley (/api/health answers ok)"}
	case status == http.StatusServiceUnavailable:
		return finding{Check: check, Problem: "the parley serving " + addr + " says it is not running yet (starting or stopping)",
			Fix: "wait a few seconds and run parley doctor again; if it stays so, read its log"}
	}
	return finding{Check: check, Problem: addr + " is taken by another program (it does not answer /api/health as parley does)",
		Fix: "stop that program, or " + fix}
}

// localClient asks parley's own address directly: a proxy set in the
// environment is for the outside world.
var localClient = &http.Client{Transport: &http.Transport{Proxy: nil}}

// health asks the server at a listen address for parley's /api/health:
// ok when it answers 200 {"ok": true}, with what it says of its
// platforms, else the status it answered (0 for none). The probe holds no
// token: the route needs none.
func (c *checkup) health(ctx context.Context, addr string) (ok bool, status int, platforms map[string]platformReport) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dialable(addr)+"/api/health", nil)
	if err != nil {
		return false, 0, nil
	}
	resp, err := localClient.Do(req)
	if err != nil {
		return false, 0, nil
	}
	defer resp.Body.Close()
	var body struct {
		OK        bool                      `json:"ok"`
		Platforms map[string]platformReport `json:"platforms"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&body)
	return resp.StatusCode == http.StatusOK && err == nil && body.OK, resp.StatusCode, body.Platforms
}

// checkPlatforms checks every platform the configuration enables, one
// finding per problem (a check that joins several errors gives several).
func (c *checkup) checkPlatforms(ctx context.Context) []finding {
	var out []finding
	for _, row := range c.table {
		if s := serve.SectionOf(&c.cfg, row); s == nil || !s.Enabled() {
			continue
		}
		out = append(out, c.checkPlatform(ctx, row)...)
	}
	if len(out) == 0 {
		out = append(out, finding{Check: "platforms", OK: true,
			Detail: "none enabled: people use the web page only (a platform is enabled by its token; parley init lists the keys)"})
	}
	return out
}

// checkPlatform builds row's adapter and runs its Check exactly as serve
// does (serve.Main.BuildAdapters, on a table of this one row), on the data
// directory's store when it is free: what a Check keeps there (a Matrix
// password login's token, reused rather than making a new device at every
// login) is then what serve will find. When a running parley holds the
// store, or there is none yet, the Check gets a throwaway store, so doctor
// never creates or waits on the real one. Received files would go to a
// throwaway directory; a Check writes none.
func (c *checkup) checkPlatform(ctx context.Context, row platform.Platform) []finding {
	name := string(row.Name)
	fail := func(err error) []finding { return []finding{failed(name, err)} }
	dir, err := os.MkdirTemp("", "parley-doctor-")
	if err != nil {
		return fail(core.WithFix(fmt.Errorf("doctor: scratch directory: %w", err), "make the temporary directory ($TMPDIR, else /tmp) writable"))
	}
	defer os.RemoveAll(dir)
	var st store.Store
	switch {
	case c.storeReady:
		// The database the store check found current: opening it
		// migrates nothing.
		st, err = postgres.Open(ctx, c.cfg.Store.URL, postgres.Options{})
		if err != nil {
			st = nil
		}
	case c.storeFree:
		var b *bolt.Store
		if b, err = bolt.Open(filepath.Join(c.cfg.DataDir, daemon.DBFile), bolt.Options{LockTimeout: c.lockTimeout}); err == nil {
			st = b
		}
	}
	if st == nil {
		// Not free, or taken since checkDataDir looked.
		st, err = bolt.Open(filepath.Join(dir, daemon.DBFile), bolt.Options{NoSync: true})
	}
	if err != nil {
		return fail(core.WithFix(fmt.Errorf("doctor: scratch store: %w", err), "make the temporary directory ($TMPDIR, else /tmp) writable, and check data_dir as its finding says"))
	}
	defer st.Close()
	cfg := c.cfg
	cfg.DataDir = dir
	log := slog.New(slog.DiscardHandler)
	m := &serve.Main{Config: cfg, Logger: log, Platforms: []platform.Platform{row}}
	ctx, cancel := context.WithTimeout(ctx, platformTimeout)
	defer cancel()
	adapters, err := m.BuildAdapters(ctx, daemon.Deps{Store: st, Leases: st, Bus: core.NewMemBus(1), Handler: refuseCommands, Authorizer: admitNobody, Pacer: directPacer{}, Logger: log}, true)
	if err != nil {
		var out []finding
		for _, e := range splitErr(err) {
			out = append(out, failed(name, e))
		}
		return out
	}
	detail := "connected; the adapter's checks of its configuration passed"
	var notes []finding
	if len(adapters) == 1 {
		if _, ok := adapters[0].(serve.Checker); !ok {
			detail = "configured; this adapter has no checks against its platform"
		}
		if d, ok := adapters[0].(diagnoser); ok {
			found, err := d.Diagnose(ctx)
			if err != nil {
				return fail(err)
			}
			for _, n := range found {
				notes = append(notes, finding{Check: name, OK: true, Detail: n})
			}
		}
	}
	return append([]finding{{Check: name, OK: true, Detail: detail}}, notes...)
}

// diagnoser is an adapter that can say, after its Check, what works only
// in part on its platform (Matrix: rooms where the bot lacks the power to
// rename or redact). Its notes do not fail the checkup: parley runs, and
// skips what it may not do.
type diagnoser interface {
	Diagnose(ctx context.Context) ([]string, error)
}

// refuseCommands is the command handler of adapters doctor builds: they
// are checked, never run, so nothing may reach it.
var refuseCommands = core.HandlerFunc(func(context.Context, core.Command) (core.Result, error) {
	return core.Result{}, errors.New("doctor: adapters are only checked")
})

// admitNobody is the allow-list of adapters doctor builds: they are never
// run, so nobody is admitted.
var admitNobody = core.AuthorizerFunc(func(core.Origin, core.Actor) bool { return false })

// directPacer runs an operation at once, for a Check that goes through
// its pacer: doctor makes a handful of calls, no outbox is needed.
type directPacer struct{}

func (directPacer) Do(ctx context.Context, op core.Op) error {
	if op.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, op.Timeout)
		defer cancel()
	}
	err := op.Run(ctx, op.Place)
	if op.Done != nil {
		op.Done(err)
	}
	return err
}

// checkTranscription checks that the transcription endpoint answers and
// takes the key, asking its OpenAI-compatible model list: that costs
// nothing, while a transcription would. A server without that route (404)
// still answered.
func (c *checkup) checkTranscription(ctx context.Context) finding {
	const check = "transcription"
	t := c.cfg.Transcription
	shown := t.APIURL
	if u, err := url.Parse(t.APIURL); err == nil {
		shown = u.Redacted()
	}
	base := strings.TrimSuffix(strings.TrimSuffix(t.APIURL, "/"), "/audio/transcriptions")
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return finding{Check: check, Problem: fmt.Sprintf("%s: %v", shown, err), Fix: "correct [transcription] api_url (PARLEY_TRANSCRIPTION_API_URL)"}
	}
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return finding{Check: check, Problem: fmt.Sprintf("cannot reach the transcription endpoint %s: %v", shown, errors.Unwrap(err)),
			Fix: "start the transcription server, or correct [transcription] api_url (PARLEY_TRANSCRIPTION_API_URL)"}
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return finding{Check: check, Problem: fmt.Sprintf("the transcription endpoint %s refused the key (%s)", shown, resp.Status),
			Fix: "set [transcription] api_key (PARLEY_TRANSCRIPTION_API_KEY) to a key it accepts"}
	case resp.StatusCode >= 500:
		return finding{Check: check, Problem: fmt.Sprintf("the transcription endpoint %s fails (%s)", shown, resp.Status),
			Fix: "read the transcription server's log"}
	}
	return finding{Check: check, OK: true, Detail: fmt.Sprintf("%s answers (%s)", shown, resp.Status)}
}

// checkMCP connects to the running parley's /mcp as an agent would, with
// mcp-go's client and the configured token: initialize, then tools/list.
// Without a running parley there is nothing to connect to.
func (c *checkup) checkMCP(ctx context.Context) finding {
	const check = "mcp"
	addr := c.cfg.HTTP.Listen
	if !c.running {
		return finding{Check: check, OK: true,
			Detail: "not tried: no parley serves " + addr + "; start parley serve and run parley doctor again to check that agents can connect"}
	}
	u := "http://" + dialable(addr) + "/mcp"
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPTimeout(mcpTimeout)}
	if tok := c.cfg.HTTP.Token; tok != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	}
	tr, err := transport.NewStreamableHTTP(u, opts...)
	if err != nil {
		return finding{Check: check, Problem: fmt.Sprintf("%s: %v", u, err), Fix: "set [http] listen to the running parley's address"}
	}
	cl := client.NewClient(tr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, mcpTimeout)
	defer cancel()
	err = cl.Start(ctx)
	var init *mcpgo.InitializeResult
	if err == nil {
		init, err = cl.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
			ClientInfo: mcpgo.Implementation{Name: "parley-doctor", Version: Version()}}})
	}
	var tools *mcpgo.ListToolsResult
	if err == nil {
		tools, err = cl.ListTools(ctx, mcpgo.ListToolsRequest{})
	}
	switch {
	case errors.Is(err, transport.ErrAuthorizationRequired) && c.cfg.HTTP.Token == "":
		return finding{Check: check, Problem: "the parley at " + addr + " requires a token, and this configuration has none",
			Fix: "set [http] token (PARLEY_HTTP_TOKEN) to the running parley's token"}
	case errors.Is(err, transport.ErrAuthorizationRequired):
		return finding{Check: check, Problem: "the parley at " + addr + " refused [http] token: it was started with another",
			Fix: "set [http] token (PARLEY_HTTP_TOKEN) to the running parley's token"}
	case err != nil:
		return finding{Check: check, Problem: fmt.Sprintf("an MCP client cannot use %s: %v", u, err),
			Fix: "read the running parley's log; agents connect to this URL"}
	case len(tools.Tools) == 0:
		return finding{Check: check, Problem: u + " offers no tools", Fix: "read the running parley's log"}
	}
	return finding{Check: check, OK: true, Detail: fmt.Sprintf("an MCP client connected to %s (%s %s, %d tools)",
		u, init.ServerInfo.Name, init.ServerInfo.Version, len(tools.Tools))}
}
