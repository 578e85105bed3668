package matrixtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// DendriteVersion is the Dendrite release the harness runs; the Makefile's
// dendrite target builds the same one, from github.com/matrix-org/dendrite:
// the last release under Apache-2.0 (later ones are AGPL and must not be
// used). It serves what the adapter uses, authenticated media
// (/_matrix/client/v1/media) included, with the same configuration keys and
// flags as the later releases.
const DendriteVersion = "v0.13.8"

// DirEnv names the environment variable holding the directory of the
// Dendrite binaries; `make test` sets it. Without it the default cache of
// the Makefile is used.
const DirEnv = "PARLEY_DENDRITE_DIR"

// How long Dendrite may take to answer on its port after it was started;
// it takes about a second here, much more only on a starved machine.
const startTimeout = 60 * time.Second

// Homeserver is a running Dendrite started by [Dendrite].
type Homeserver struct {
	// URL is the client-server API's base URL, http://127.0.0.1:PORT.
	URL string
	// ServerName is the part after the colon in the server's ids
	// ("localhost"): @alice:localhost.
	ServerName string
	// Dir holds the configuration, databases, media and log.
	Dir string

	logPath string
	// identity is this server's well_known_server_name, unique to it: the
	// proof that what answers on URL's port is this server (see [Dendrite]).
	identity string
}

// BinDir returns the directory that holds the Dendrite binaries: $DirEnv,
// or the Makefile's default cache.
func BinDir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "parley", "dendrite-"+DendriteVersion)
}

// Dendrite starts a fresh homeserver for the test and stops it when the
// test ends. It skips the test when the binaries are missing (fails it when
// the CI variable is set) and fails it when Dendrite does not come up. It
// returns only once the server on URL has proved to be this one, whatever
// other processes start at the same time, and fails the test if that
// server exits before the test ends.
func Dendrite(tb testing.TB) *Homeserver {
	tb.Helper()
	bin := BinDir()
	for _, name := range []string{"dendrite", "generate-config", "generate-keys"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			msg := fmt.Sprintf("no Dendrite binaries in %s (%s): run make test-deps", bin, DirEnv)
			if os.Getenv("CI") != "" || os.Getenv("PARLEY_TEST_DEPS") == "required" {
				tb.Fatal(msg)
			}
			tb.Skip(msg)
		}
	}
	h, cfgPath := configure(tb, bin)
	// The free port is found by binding and releasing it, so another
	// process — another test binary's Dendrite, a proxy, any listener — may
	// take it before this Dendrite binds it. Dendrite then exits at bind,
	// but until it does the port answers for someone else, with a 200 on
	// /versions when that is a homeserver too; the readiness check
	// therefore accepts only this server's identity, and a Dendrite that
	// could not bind is retried on another port.
	for attempt := 1; ; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			tb.Fatalf("dendrite port: %v", err)
		}
		err = h.start(tb, bin, cfgPath, addr)
		if err == nil {
			return h
		}
		if attempt == startAttempts || !errors.Is(err, errPortTaken) {
			tb.Fatalf("dendrite did not start: %v\n%s", err, h.logTail(80))
		}
		tb.Logf("%v, retrying on another port", err)
	}
}

// How many ports [Dendrite] tries. Each failure takes another listener
// binding the port in the second or so between its release and Dendrite's
// bind, which is rare in the machine's port range; a crowded range only
// costs more attempts.
const startAttempts = 10

var (
	errExited    = errors.New("dendrite exited")
	errPortTaken = errors.New("dendrite's port was taken")
)

// bindFailure is what Dendrite logs when the port is taken: Go's own
// message, under Dendrite's "failed to serve HTTP".
const bindFailure = "bind: address already in use"

// configure writes a fresh configuration with its own identity into a
// temporary directory of the test.
func configure(tb testing.TB, bin string) (h *Homeserver, cfgPath string) {
	tb.Helper()
	dir := tb.TempDir()
	identity := newIdentity()
	cfgPath, serverName, err := writeConfig(bin, dir, identity)
	if err != nil {
		tb.Fatalf("dendrite config: %v", err)
	}
	return &Homeserver{ServerName: serverName, Dir: dir, logPath: filepath.Join(dir, "dendrite.log"), identity: identity}, cfgPath
}

// start runs Dendrite on addr and returns once it is ready there, or
// errPortTaken when it exited because addr was taken, errExited when it
// exited for another reason.
func (h *Homeserver) start(tb testing.TB, bin, cfgPath, addr string) error {
	var logStart int64 // this attempt's part of the log
	if fi, err := os.Stat(h.logPath); err == nil {
		logStart = fi.Size()
	}
	logf, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bin, "dendrite"),
		"-config", cfgPath,
		"-http-bind-address", addr,
		// The CI configuration's open registration without a captcha
		// needs this flag too; the server is reachable from loopback only.
		"-really-enable-open-registration")
	cmd.Dir = h.Dir
	cmd.SysProcAttr = dieWithParent()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	// exited is closed once Dendrite exited, with waitErr set: readiness,
	// stop and cleanup all look at it, so none may consume it.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); logf.Close(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	h.URL = "http://" + addr
	if err := waitReady(h.URL, h.identity, exited); err != nil {
		stop()
		if errors.Is(err, errExited) {
			if h.logSince(logStart, bindFailure) {
				return fmt.Errorf("%w: %s (%v)", errPortTaken, addr, err)
			}
			err = fmt.Errorf("%w (%v)", err, waitErr)
		}
		return err
	}
	tb.Cleanup(func() {
		select {
		case <-exited:
			// Its port was free from then on, for anyone: what the test
			// talked to since is unknown.
			tb.Errorf("dendrite exited during the test: %v", waitErr)
		default:
		}
		stop()
		if tb.Failed() {
			tb.Logf("dendrite log (last lines of %s):\n%s", h.logPath, h.logTail(200))
		}
	})
	return nil
}

// waitReady polls base until the server there proves to be the one with
// this identity, Dendrite exits, or startTimeout passes. Any other answer —
// another homeserver's, another program's — is a server that holds the
// port this Dendrite was told to bind, so this one will exit.
func waitReady(base, identity string, exited <-chan struct{}) error {
	// Its own transport: no connection kept alive to whoever answered.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.After(startTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		got, err := serverIdentity(client, base)
		if err == nil && got == identity {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("another server answers (m.server %q)", got)
		}
		select {
		case <-exited:
			return fmt.Errorf("%w; last probe: %s", errExited, last)
		case <-deadline:
			return fmt.Errorf("%s not ready after %v: %s", base, startTimeout, last)
		case <-tick.C:
		}
	}
}

// wellKnownServer is where Dendrite serves its well_known_server_name, with
// federation off too.
const wellKnownServer = "/.well-known/matrix/server"

// serverIdentity returns the m.server that the server at base announces.
func serverIdentity(client *http.Client, base string) (string, error) {
	resp, err := client.Get(base + wellKnownServer)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: HTTP %d", wellKnownServer, resp.StatusCode)
	}
	var body struct {
		Server string `json:"m.server"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", fmt.Errorf("%s: %w", wellKnownServer, err)
	}
	return body.Server, nil
}

// newIdentity returns a name no other server has: federation is off, so
// the delegation it is published as is never followed, and .invalid never
// resolves should anything try.
func newIdentity() string {
	return strings.ToLower(rand.Text()) + ".matrixtest.invalid"
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// writeConfig generates Dendrite's CI configuration (SQLite in dir, open
// registration) and a signing key, then adjusts the configuration for a
// test: federation off, Dendrite's own rate limiting off, no full-text
// search or presence (work nobody looks at), a readable log level, and
// identity published as the server's well-known delegation so that the
// harness recognises it.
func writeConfig(bin, dir, identity string) (path, serverName string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keyPath := filepath.Join(dir, "matrix_key.pem")
	if out, err := exec.CommandContext(ctx, filepath.Join(bin, "generate-keys"), "-private-key", keyPath).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("generate-keys: %v: %s", err, out)
	}
	var stderr bytes.Buffer
	gen := exec.CommandContext(ctx, filepath.Join(bin, "generate-config"), "-ci", "-dir", dir)
	gen.Stderr = &stderr
	out, err := gen.Output()
	if err != nil {
		return "", "", fmt.Errorf("generate-config: %v: %s", err, stderr.Bytes())
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		return "", "", fmt.Errorf("generate-config output: %w", err)
	}
	for key, value := range map[string]any{
		"global.private_key":                    keyPath,
		"global.disable_federation":             true,
		"global.well_known_server_name":         identity,
		"global.trusted_third_party_id_servers": []string{},
		"global.presence.enable_inbound":        false,
		"global.presence.enable_outbound":       false,
		"client_api.rate_limiting.enabled":      false,
		"sync_api.search.enabled":               false,
		"logging":                               []map[string]any{{"type": "std", "level": "info"}},
	} {
		if err := setKey(cfg, key, value); err != nil {
			return "", "", err
		}
	}
	serverName, _ = lookup(cfg, "global.server_name").(string)
	if serverName == "" {
		return "", "", errors.New("generated config has no global.server_name")
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(dir, "dendrite.yaml")
	return path, serverName, os.WriteFile(path, data, 0o600)
}

// setKey sets a dotted key of a decoded YAML document; the intermediate
// mappings must exist, so that a key renamed by a later Dendrite fails here
// rather than being silently ignored.
func setKey(doc map[string]any, key string, value any) error {
	parts := strings.Split(key, ".")
	m := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return fmt.Errorf("dendrite config has no %q (setting %s)", p, key)
		}
		m = next
	}
	last := parts[len(parts)-1]
	if _, ok := m[last]; !ok {
		return fmt.Errorf("dendrite config has no key %s", key)
	}
	m[last] = value
	return nil
}

func lookup(doc map[string]any, key string) any {
	var v any = doc
	for _, p := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// logSince reports whether Dendrite's log has s after offset off.
func (h *Homeserver) logSince(off int64, s string) bool {
	data, err := os.ReadFile(h.logPath)
	if err != nil || off > int64(len(data)) {
		return false
	}
	return bytes.Contains(data[off:], []byte(s))
}

// logTail returns the last n lines of Dendrite's log.
func (h *Homeserver) logTail(n int) string {
	data, err := os.ReadFile(h.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
