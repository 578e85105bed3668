package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// runDoctor runs parley doctor --json with env (plus a fresh data
// directory and a free port unless env sets them) and returns its exit
// code and findings.
func runDoctor(t *testing.T, env ...string) (int, []finding) {
	t.Helper()
	env = append([]string{"HOME=" + t.TempDir(), "PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_HTTP_LISTEN=127.0.0.1:0"}, env...)
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"doctor", "--json"}, env, nil, &out, &errOut)
	var fs []finding
	if err := json.Unmarshal(out.Bytes(), &fs); err != nil {
		t.Fatalf("doctor --json printed no JSON list (%v): %s%s", err, out.String(), errOut.String())
	}
	return code, fs
}

// only returns the findings of one check.
func only(fs []finding, check string) []finding {
	var out []finding
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// wantFinding checks that check has exactly one finding, failed or not as
// ok says, whose problem (or detail) says every one of want.
func wantFinding(t *testing.T, fs []finding, check string, ok bool, want ...string) finding {
	t.Helper()
	got := only(fs, check)
	if len(got) != 1 {
		t.Fatalf("%d %s findings, want 1: %+v", len(got), check, fs)
	}
	f := got[0]
	if f.OK != ok {
		t.Errorf("%s ok=%v, want %v: %+v", check, f.OK, ok, f)
	}
	text := f.Problem + " " + f.Fix + " " + f.Detail
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s finding does not say %q: %+v", check, w, f)
		}
	}
	return f
}

func TestDoctorTelegramFindings(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("Team")
	plain := srv.NewGroupWithoutTopics("Plain")
	weak := srv.NewForum("Weak")
	srv.SetBotRights(weak, telegramtest.Rights{Admin: true, ManageTopics: true})
	tests := []struct {
		name  string
		token string
		chat  int64
		ok    bool
		want  []string
	}{
		{"all good", srv.Token, forum, true, []string{"checks of its configuration passed"}},
		{"wrong token", "1:wrong", forum, false, []string{"token was refused", "PARLEY_TELEGRAM_TOKEN", "@BotFather"}},
		{"unknown group", srv.Token, -999, false, []string{"chat -999", "add the bot to the group", "chat_id"}},
		{"group without topics", srv.Token, plain, false, []string{"has no topics", "enable Topics"}},
		{"bot without the right to delete", srv.Token, weak, false, []string{"must be an administrator", "Delete messages"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, fs := runDoctor(t, "PARLEY_TELEGRAM_TOKEN="+tt.token, "PARLEY_TELEGRAM_API_URL="+srv.URL,
				"PARLEY_TELEGRAM_CHAT_ID="+strconv.FormatInt(tt.chat, 10), "PARLEY_TELEGRAM_ALLOWED_USERS=1")
			f := wantFinding(t, fs, "telegram", tt.ok, tt.want...)
			if wantCode := map[bool]int{true: exitOK, false: exitFailed}[tt.ok]; code != wantCode {
				t.Errorf("exit %d, want %d: %+v", code, wantCode, fs)
			}
			if strings.Contains(f.Problem, srv.Token) {
				t.Errorf("the finding quotes the token: %s", f.Problem)
			}
		})
	}
}

func TestDoctorSlackFindings(t *testing.T) {
	without := func(scope string) []string {
		var out []string
		for _, s := range slacktest.DefaultScopes {
			if s != scope {
				out = append(out, s)
			}
		}
		return out
	}
	tests := []struct {
		name     string
		opts     slacktest.Options
		botToken string
		noBot    bool
		ok       bool
		want     []string
	}{
		{name: "all good", ok: true, want: []string{"passed"}},
		{name: "missing scope", opts: slacktest.Options{Scopes: without("reactions:write")},
			want: []string{"lacks the scope reactions:write", "reinstall"}},
		{name: "bot not in the channel", noBot: true, want: []string{"not a member of #agents", "/invite @parley"}},
		{name: "no Socket Mode", opts: slacktest.Options{AppScopes: []string{"authorizations:read"}},
			want: []string{"Socket Mode", "connections:write", "app_token"}},
		{name: "wrong bot token", botToken: "xoxb-1000000001-2000000002-NotTheRightToken",
			want: []string{"refused the bot token", "invalid_auth", "PARLEY_SLACK_BOT_TOKEN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := slacktest.NewServer(t, tt.opts)
			channel := srv.NewChannel("agents")
			if tt.noBot {
				channel = srv.NewChannelWithoutBot("agents")
			}
			tok := srv.BotToken
			if tt.botToken != "" {
				tok = tt.botToken
			}
			code, fs := runDoctor(t, "PARLEY_SLACK_BOT_TOKEN="+tok, "PARLEY_SLACK_APP_TOKEN="+srv.AppToken,
				"PARLEY_SLACK_API_URL="+srv.URL, "PARLEY_SLACK_CHANNEL="+channel, "PARLEY_SLACK_ALLOWED_USERS=U1AB")
			f := wantFinding(t, fs, "slack", tt.ok, tt.want...)
			if (code == exitOK) != tt.ok {
				t.Errorf("exit %d: %+v", code, fs)
			}
			if strings.Contains(f.Problem, srv.BotToken) || strings.Contains(f.Problem, srv.AppToken) {
				t.Errorf("the finding quotes a token: %s", f.Problem)
			}
		})
	}
}

// joinedChecker is an adapter whose Check finds several problems at once.
type joinedChecker struct {
	*fake.Adapter
	errs []error
}

func (j joinedChecker) Check(context.Context) error { return errors.Join(j.errs...) }

// TestDoctorPlatformFromTheTable: a platform gets its checks from its row
// of the table and its adapter's Check alone, and a Check that joins
// several problems gives one finding each.
func TestDoctorPlatformFromTheTable(t *testing.T) {
	row := func(errs ...error) platform.Platform {
		return testPlatform("fake", probeSection{on: true},
			func(context.Context, probeSection, platform.Deps) (core.Adapter, error) {
				return joinedChecker{Adapter: fake.New("fake", core.Capabilities{}), errs: errs}, nil
			})
	}
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen = t.TempDir(), "127.0.0.1:0"

	c := &checkup{cfg: cfg, table: []platform.Platform{row(errors.New("fake: the room is gone: recreate it"), errors.New("fake: no power: grant it"))}}
	fs := only(c.run(context.Background()), "fake")
	if len(fs) != 2 || fs[0].OK || fs[1].OK || fs[0].Problem != "fake: the room is gone: recreate it" || fs[1].Problem != "fake: no power: grant it" {
		t.Errorf("findings %+v, want the two problems apart", fs)
	}

	c = &checkup{cfg: cfg, table: []platform.Platform{row()}}
	wantFinding(t, c.run(context.Background()), "fake", true, "passed")

	// A row whose adapter has no Check is configured, not checked.
	plain := fakePlatform()
	c = &checkup{cfg: cfg, table: []platform.Platform{plain}}
	wantFinding(t, c.run(context.Background()), "fake", true, "no checks")
}

func TestDoctorConfigFindings(t *testing.T) {
	code, fs := runDoctor(t, "PARLEY_LOG_FORMAT=yaml", "PARLEY_OUTBOX_FLUSH_INTERVAL=0s")
	if code != exitFailed {
		t.Errorf("exit %d", code)
	}
	cf := only(fs, "config")
	if len(cf) != 2 {
		t.Fatalf("%d config findings, want one per problem: %+v", len(cf), fs)
	}
	for i, want := range []string{"PARLEY_LOG_FORMAT", "PARLEY_OUTBOX_FLUSH_INTERVAL"} {
		if cf[i].OK || !strings.Contains(cf[i].Problem, want) {
			t.Errorf("finding %d %+v does not name %s", i, cf[i], want)
		}
	}
	if len(only(fs, "listen")) != 0 {
		t.Errorf("checks ran on an invalid configuration: %+v", fs)
	}

	missing := filepath.Join(t.TempDir(), "parley.toml")
	code, fs = runDoctor(t, "PARLEY_CONFIG="+missing)
	if code != exitFailed {
		t.Errorf("missing file: exit %d", code)
	}
	wantFinding(t, fs, "config", false, missing, "parley init "+missing)
}

func TestDoctorDataDirFindings(t *testing.T) {
	t.Parallel()
	t.Run("does not exist yet", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b")
		_, fs := runDoctor(t, "PARLEY_DATA_DIR="+dir)
		wantFinding(t, fs, "data_dir", true, "does not exist yet")
		if _, err := os.Stat(dir); err == nil {
			t.Error("doctor created the data directory")
		}
	})
	t.Run("a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "f")
		os.WriteFile(file, nil, 0o600)
		_, fs := runDoctor(t, "PARLEY_DATA_DIR="+file)
		wantFinding(t, fs, "data_dir", false, "is not a directory", "PARLEY_DATA_DIR")
	})
	t.Run("not writable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes everywhere")
		}
		dir := t.TempDir()
		os.Chmod(dir, 0o500)
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		_, fs := runDoctor(t, "PARLEY_DATA_DIR="+dir)
		wantFinding(t, fs, "data_dir", false, "is not writable", "chown")
	})
	t.Run("in use by another parley", func(t *testing.T) {
		dir := t.TempDir()
		st, err := bolt.Open(filepath.Join(dir, daemon.DBFile), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		// Another process holds the lock: bbolt's flock is per open file
		// description, so a second open in this process is refused alike.
		_, fs := runDoctor(t, "PARLEY_DATA_DIR="+dir)
		wantFinding(t, fs, "data_dir", false, "another parley is using "+dir, "data_dir")
	})
	t.Run("schema of a newer parley", func(t *testing.T) {
		dir := t.TempDir()
		db, err := bbolt.Open(filepath.Join(dir, daemon.DBFile), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("meta"))
			if err != nil {
				return err
			}
			return b.Put([]byte("schema"), []byte(strconv.Itoa(bolt.SchemaVersion+1)))
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, fs := runDoctor(t, "PARLEY_DATA_DIR="+dir)
		wantFinding(t, fs, "data_dir", false, "written by a newer parley", "schema version "+strconv.Itoa(bolt.SchemaVersion+1))
	})
	t.Run("a database parley can use", func(t *testing.T) {
		dir := t.TempDir()
		st, err := bolt.Open(filepath.Join(dir, daemon.DBFile), bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		_, fs := runDoctor(t, "PARLEY_DATA_DIR="+dir)
		wantFinding(t, fs, "data_dir", true, "its database opens")
	})
}

// startParley runs a daemon as parley serve would, on a free loopback
// port, and returns its configuration.
func startParley(t *testing.T, token string) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen, cfg.HTTP.Token = t.TempDir(), "127.0.0.1:0", token
	m := servetest.Serve(t, &serve.Main{Config: cfg, Platforms: platforms.All()})
	// The page answers /api/health once the web platform started.
	servetest.AwaitStarted(t, m)
	cfg.HTTP.Listen = m.Addr()
	return cfg
}

func TestDoctorAgainstARunningParley(t *testing.T) {
	t.Parallel()
	cfg := startParley(t, "s3cret")
	env := []string{"PARLEY_DATA_DIR=" + cfg.DataDir, "PARLEY_HTTP_LISTEN=" + cfg.HTTP.Listen}

	code, fs := runDoctor(t, append(env, "PARLEY_HTTP_TOKEN=s3cret")...)
	if code != exitOK {
		t.Errorf("exit %d: %+v", code, fs)
	}
	wantFinding(t, fs, "listen", true, "served by a running parley")
	wantFinding(t, fs, "data_dir", true, "in use by the parley serving "+cfg.HTTP.Listen)
	wantFinding(t, fs, "mcp", true, "an MCP client connected", "tools")

	_, fs = runDoctor(t, append(env, "PARLEY_HTTP_TOKEN=wrong")...)
	wantFinding(t, fs, "mcp", false, "refused [http] token", "PARLEY_HTTP_TOKEN")
	_, fs = runDoctor(t, env...)
	wantFinding(t, fs, "mcp", false, "requires a token", "PARLEY_HTTP_TOKEN")
}

func TestDoctorListenTakenByAnotherProgram(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	addr := strings.TrimPrefix(other.URL, "http://")
	code, fs := runDoctor(t, "PARLEY_HTTP_LISTEN="+addr)
	if code != exitFailed {
		t.Errorf("exit %d", code)
	}
	wantFinding(t, fs, "listen", false, addr+" is taken by another program", "PARLEY_HTTP_LISTEN")
	wantFinding(t, fs, "mcp", true, "not tried")
}

func TestDoctorTranscriptionFindings(t *testing.T) {
	var auth string
	whisper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		if auth != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"data":[]}`)
	}))
	defer whisper.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	_, fs := runDoctor(t, "PARLEY_TRANSCRIPTION_API_URL="+whisper.URL+"/v1", "PARLEY_TRANSCRIPTION_API_KEY=good")
	wantFinding(t, fs, "transcription", true, "answers (200 OK)")
	_, fs = runDoctor(t, "PARLEY_TRANSCRIPTION_API_URL="+whisper.URL+"/v1/audio/transcriptions", "PARLEY_TRANSCRIPTION_API_KEY=bad")
	wantFinding(t, fs, "transcription", false, "refused the key", "PARLEY_TRANSCRIPTION_API_KEY")
	if auth != "Bearer bad" {
		t.Errorf("the key was sent as %q", auth)
	}
	_, fs = runDoctor(t, "PARLEY_TRANSCRIPTION_API_URL="+gone.URL+"/v1")
	wantFinding(t, fs, "transcription", false, "cannot reach the transcription endpoint", "PARLEY_TRANSCRIPTION_API_URL")
	_, fs = runDoctor(t)
	if len(only(fs, "transcription")) != 0 {
		t.Errorf("transcription checked without being configured: %+v", fs)
	}
}

// TestDoctorText: for people, each failure is followed by its fix, and the
// summary counts the failures.
func TestDoctorText(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	addr := strings.TrimPrefix(other.URL, "http://")
	var out, errOut bytes.Buffer
	// The flags are serve's, and win over the file as there.
	cfg := filepath.Join(t.TempDir(), "parley.toml")
	os.WriteFile(cfg, []byte("[http]\nlisten = \"127.0.0.1:0\"\n"), 0o600)
	code := Run(context.Background(), []string{"doctor", "--config", cfg, "--listen", addr, "--data-dir", t.TempDir()},
		[]string{"HOME=" + t.TempDir()}, nil, &out, &errOut)
	if code != exitFailed {
		t.Errorf("exit %d", code)
	}
	for _, w := range []string{
		"ok    config: loaded " + cfg,
		"ok    data_dir: ",
		"FAIL  listen: " + addr + " is taken by another program",
		"      fix: stop that program, or set [http] listen",
		"\n1 check failed.\n",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output does not contain %q:\n%s", w, out.String())
		}
	}
}

// TestServeStopsOnDoctorFindings: serve makes the same checks before it
// starts, and stops with the finding and its fix.
func TestServeStopsOnDoctorFindings(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	running := startParley(t, "")
	held := t.TempDir()
	st, err := bolt.Open(filepath.Join(held, daemon.DBFile), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"address taken", []string{"PARLEY_HTTP_LISTEN=" + strings.TrimPrefix(other.URL, "http://")}, []string{"is taken by another program", "PARLEY_HTTP_LISTEN"}},
		{"a parley on the address", []string{"PARLEY_HTTP_LISTEN=" + running.HTTP.Listen}, []string{"a parley is already serving " + running.HTTP.Listen}},
		{"data directory in use", []string{"PARLEY_DATA_DIR=" + held}, []string{"another parley is using " + held}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_HTTP_LISTEN=127.0.0.1:0"}, tt.env...)
			var errOut bytes.Buffer
			code := Run(context.Background(), []string{"serve"}, env, nil, &bytes.Buffer{}, &errOut)
			if code != exitUsage {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("log does not say %q:\n%s", w, errOut.String())
				}
			}
		})
	}
}

// TestServeWarnsOfTranscription: an unreachable transcription endpoint
// does not stop serve (voice notes are optional), it is logged with the
// fix.
func TestServeWarnsOfTranscription(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errOut servetest.Buffer
	done := make(chan int, 1)
	env := []string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_HTTP_LISTEN=127.0.0.1:0", "PARLEY_TRANSCRIPTION_API_URL=" + gone.URL + "/v1"}
	go func() { done <- Run(ctx, []string{"serve"}, env, nil, &bytes.Buffer{}, &errOut) }()
	deadline := time.After(10 * time.Second)
	for !strings.Contains(errOut.String(), "parley started") {
		select {
		case code := <-done:
			t.Fatalf("exited with %d: %s", code, errOut.String())
		case <-deadline:
			t.Fatalf("did not start: %s", errOut.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	for _, w := range []string{"level=WARN", "voice messages will not be transcribed", "cannot reach the transcription endpoint", "PARLEY_TRANSCRIPTION_API_URL"} {
		if !strings.Contains(errOut.String(), w) {
			t.Errorf("log does not say %q:\n%s", w, errOut.String())
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop")
	}
}

// TestDoctorExposedSecrets: a configuration file with a token that every
// user can read is a finding; without secrets, or readable by its owner
// and group only, it is not.
func TestDoctorExposedSecrets(t *testing.T) {
	write := func(text string, mode os.FileMode) string {
		path := filepath.Join(t.TempDir(), "parley.toml")
		os.WriteFile(path, []byte(text), mode)
		os.Chmod(path, mode)
		return path
	}
	run := func(path string) []finding {
		var out bytes.Buffer
		Run(context.Background(), []string{"doctor", "--json", "--config", path, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()},
			[]string{"HOME=" + t.TempDir()}, nil, &out, &bytes.Buffer{})
		var fs []finding
		if err := json.Unmarshal(out.Bytes(), &fs); err != nil {
			t.Fatal(err)
		}
		return only(fs, "config")
	}
	secret := "[http]\ntoken = \"s3cret\"\n"
	path := write(secret, 0o644)
	fs := run(path)
	if len(fs) != 2 || fs[1].OK || !strings.Contains(fs[1].Problem, "every user of this machine can read it (mode 0644)") || fs[1].Fix != "chmod 600 "+path+" (or 640, with the group the service runs as)" {
		t.Errorf("findings %+v", fs)
	}
	if strings.Contains(fs[1].Problem, "s3cret") {
		t.Error("the finding quotes the secret")
	}
	for _, p := range []string{write(secret, 0o640), write("[log]\nlevel = \"debug\"\n", 0o644)} {
		if fs := run(p); len(fs) != 1 || !fs[0].OK {
			t.Errorf("%s: findings %+v", p, fs)
		}
	}
}

// cursorChecker's Check keeps something in the store, as Matrix keeps a
// password login's token.
type cursorChecker struct {
	*fake.Adapter
	st core.Store
}

func (c cursorChecker) Check(ctx context.Context) error {
	return c.st.SetCursor(ctx, "test.login", "kept")
}

// TestDoctorPlatformsUseTheFreeStore: a platform's Check runs on the data
// directory's store when no parley holds it, so what it keeps there is
// what serve finds; doctor creates no store, and waits on none in use.
func TestDoctorPlatformsUseTheFreeStore(t *testing.T) {
	row := testPlatform("fake", probeSection{on: true},
		func(_ context.Context, _ probeSection, d platform.Deps) (core.Adapter, error) {
			return cursorChecker{Adapter: fake.New("fake", core.Capabilities{}), st: d.Store}, nil
		})
	cfg := config.Default()
	cfg.HTTP.Listen = "127.0.0.1:0"
	db := func(dir string) string { return filepath.Join(dir, daemon.DBFile) }

	// No database yet: none is created.
	cfg.DataDir = t.TempDir()
	wantFinding(t, (&checkup{cfg: cfg, table: []platform.Platform{row}}).run(context.Background()), "fake", true)
	if _, err := os.Stat(db(cfg.DataDir)); err == nil {
		t.Error("doctor created the database")
	}

	// A free database: the Check's cursor is kept there.
	st, err := bolt.Open(db(cfg.DataDir), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	wantFinding(t, (&checkup{cfg: cfg, table: []platform.Platform{row}}).run(context.Background()), "fake", true)
	st, err = bolt.Open(db(cfg.DataDir), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, err := st.Cursor(context.Background(), "test.login"); err != nil || v != "kept" {
		t.Errorf("cursor %q, %v: the Check did not run on the data directory's store", v, err)
	}

	// Held by another parley: the Check still runs, on a throwaway store.
	fs := (&checkup{cfg: cfg, table: []platform.Platform{row}, lockTimeout: 50 * time.Millisecond}).run(context.Background())
	wantFinding(t, fs, "fake", true)
	wantFinding(t, fs, "data_dir", false, "another parley is using")
}
