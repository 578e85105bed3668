// Package pgtest runs throwaway PostgreSQL servers for tests, from the
// binaries of Debian's postgresql package (/usr/lib/postgresql/N/bin;
// `make test-deps` installs it where missing).
//
// initdb takes seconds; copying an initialized data directory takes half of
// one. So a test binary initializes one cluster as a template, the first
// time a test asks for a server, and every Server copies it (cp -a) and
// starts the copy on 127.0.0.1 with a free port and fsync off: a test's
// server costs about half a second and shares nothing with the others.
// initdb and postgres refuse to run as root, the tests' usual user here, so
// as root they run as the postgres user (the package's system user) in
// directories that user owns. The template lives until the test binary
// ends, which is why a package that uses Server calls Main from TestMain.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// BinEnv names the environment variable that may hold the directory of the
// PostgreSQL binaries; without it the newest /usr/lib/postgresql/N/bin with
// initdb is used.
const BinEnv = "PARLEY_POSTGRES_BIN"

// MinVersion is the oldest PostgreSQL major version parley supports.
const MinVersion = 15

// User is the superuser the servers are initialized with (trust
// authentication on 127.0.0.1 and the socket).
const User = "parley"

var (
	mainCalled bool
	base       string // the template and every server's directory, under os.TempDir
	runAs      *syscall.Credential

	templateOnce sync.Once
	templateDir  string
	templateErr  error
)

// Main runs the tests of a package that uses Server and removes the template
// cluster afterwards. Call it from TestMain: func TestMain(m *testing.M) {
// pgtest.Main(m) }.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that has more to clean up after the tests: it
// runs them, removes the template cluster and returns the exit code
// instead of exiting.
func Run(m *testing.M) int {
	mainCalled = true
	code := m.Run()
	if base != "" {
		_ = os.RemoveAll(base)
	}
	return code
}

// BinDir returns the directory of the PostgreSQL binaries ($BinEnv, else the
// newest /usr/lib/postgresql/N/bin of at least MinVersion holding initdb),
// or "" when there is none.
func BinDir() string {
	if d := os.Getenv(BinEnv); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	best, bestV := "", 0
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(d))))
		if err == nil && v >= MinVersion && v > bestV {
			best, bestV = filepath.Dir(d), v
		}
	}
	return best
}

// Server is a running PostgreSQL started by Start.
type Server struct {
	// URL connects to the server's "postgres" database as User.
	URL string
	// Dir holds the data directory (Dir/data), the socket and the log
	// (Dir/log).
	Dir  string
	Port int

	bin     string
	durable bool
}

// Start starts a fresh server for the test, with fsync off, and stops and removes it when
// the test ends. It skips the test when the PostgreSQL binaries are missing
// (fails it when the CI variable is set) and fails it when the server does
// not come up.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, false)
}

// StartDurable is Start with fsync on, as in production: for benchmarks of
// durable commits, and for tests that stop it with Stop("immediate") and
// Start it again under load, so that the server recovers as in production.
func StartDurable(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, true)
}

func start(tb testing.TB, durable bool) *Server {
	tb.Helper()
	bin := BinDir()
	if _, err := os.Stat(filepath.Join(bin, "initdb")); bin == "" || err != nil {
		msg := fmt.Sprintf("no PostgreSQL %d+ binaries (%s, or /usr/lib/postgresql/N/bin): run make test-deps", MinVersion, BinEnv)
		if os.Getenv("CI") != "" || os.Getenv("PARLEY_TEST_DEPS") == "required" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	if !mainCalled {
		tb.Fatal("pgtest: call pgtest.Main(m) from the package's TestMain, so that the template cluster is removed")
	}
	templateOnce.Do(func() { templateDir, templateErr = initTemplate(bin) })
	if templateErr != nil {
		tb.Fatalf("pgtest: %v", templateErr)
	}
	dir, err := os.MkdirTemp(base, "server-")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{Dir: dir, bin: bin, durable: durable}
	tb.Cleanup(func() {
		_ = s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(dir)
	})
	if err := chown(dir); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(templateDir, "data"), s.data()).CombinedOutput(); err != nil {
		tb.Fatalf("pgtest: copy the template: %v: %s", err, out)
	}
	// Another process may take the port between freePort and the
	// server's bind: then another port.
	for attempt := 0; ; attempt++ {
		if s.Port, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		s.URL = fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", User, s.Port)
		err := s.Start()
		if err == nil {
			return s
		}
		if attempt == 2 || !strings.Contains(err.Error(), "could not bind") {
			tb.Fatal(err)
		}
	}
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// Start starts the server again after Stop, on the same port.
func (s *Server) Start() error {
	opts := fmt.Sprintf("-k %s -c listen_addresses=127.0.0.1 -p %d", s.Dir, s.Port)
	if !s.durable {
		opts += " -c fsync=off"
	}
	if err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.Dir, "log"), "-w", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
		return fmt.Errorf("pgtest: start postgres: %w\n%s", err, log)
	}
	return nil
}

// Stop stops the server; mode is pg_ctl's: "fast" (a clean shutdown that
// disconnects clients) or "immediate" (as if the machine lost power, to be
// recovered from the WAL at the next start).
func (s *Server) Stop(mode string) error {
	if err := s.run("pg_ctl", "-D", s.data(), "-m", mode, "-w", "stop"); err != nil {
		return fmt.Errorf("pgtest: stop postgres: %w", err)
	}
	return nil
}

// run runs a PostgreSQL program as the user that owns the clusters.
func (s *Server) run(name string, args ...string) error {
	return run(s.bin, name, args...)
}

func run(bin, name string, args ...string) error {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	if runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: runAs}
	}
	cmd.Dir = "/" // the postgres user may not enter the caller's directory
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// initTemplate makes the base directory and initializes the template
// cluster in it.
func initTemplate(bin string) (string, error) {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", fmt.Errorf("initdb refuses to run as root, and there is no postgres user: %w", err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return "", fmt.Errorf("postgres user: %w", err)
		}
		runAs = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	var err error
	// A short path: the socket's must fit in 107 bytes.
	if base, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return "", err
	}
	if err := chown(base); err != nil {
		return "", err
	}
	dir := filepath.Join(base, "template")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if err := chown(dir); err != nil {
		return "", err
	}
	err = run(bin, "initdb", "-D", filepath.Join(dir, "data"), "-U", User, "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	if err != nil {
		return "", err
	}
	return dir, nil
}

// chown gives dir to the user the servers run as (when that is not us) and
// lets it in.
func chown(dir string) error {
	if runAs == nil {
		return nil
	}
	if err := os.Chown(dir, int(runAs.Uid), int(runAs.Gid)); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
