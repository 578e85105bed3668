package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// installService runs parley service install with args into a fresh unit
// directory and returns the exit code, the unit's path and the output.
func installService(t *testing.T, dir string, args ...string) (code int, unit string, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	env := []string{"HOME=" + t.TempDir()}
	code = Run(context.Background(), append([]string{"service", "install", "--unit-dir", dir}, args...), env, nil, &o, &e)
	return code, filepath.Join(dir, unitName), o.String(), e.String()
}

// writeConfig writes a configuration file into a fresh directory.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "parley.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readUnit(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for l := range strings.SplitSeq(text, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("no line %q in:\n%s", l, text)
		}
	}
}

func TestServiceInstallUser(t *testing.T) {
	cfg := writeConfig(t, "[outbox]\ndrain_timeout = \"10s\"\n")
	dir := filepath.Join(t.TempDir(), "systemd", "user")
	code, path, out, errOut := installService(t, dir, "--user", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	unit := readUnit(t, path)
	wantLines(t, unit,
		"ExecStart="+exe+" serve --config "+cfg,
		"Restart=on-failure",
		"KillSignal=SIGTERM",
		// drain_timeout, the HTTP server's 5s, and a margin.
		"TimeoutStopSec=25s",
		"NoNewPrivileges=yes",
		"WantedBy=default.target")
	if strings.Contains(unit, "User=") || strings.Contains(unit, "ProtectSystem") {
		t.Errorf("a user unit names a user or system sandboxing:\n%s", unit)
	}
	for _, w := range []string{"wrote " + path, "systemctl --user daemon-reload", "systemctl --user enable --now parley.service", "loginctl enable-linger"} {
		if !strings.Contains(out, w) {
			t.Errorf("output does not say %q:\n%s", w, out)
		}
	}
	verifyUnit(t, path)
}

func TestServiceInstallSystem(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, "")
	code, path, out, errOut := installService(t, dir, "--system", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	unit := readUnit(t, path)
	wantLines(t, unit,
		"User=parley", "StateDirectory=parley", "Environment=PARLEY_DATA_DIR=%S/parley",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"CapabilityBoundingSet=", "Restart=on-failure", "TimeoutStopSec=20s", "WantedBy=multi-user.target")
	for _, w := range []string{"chown root:parley " + cfg, "systemctl daemon-reload", "systemctl enable --now parley.service", "journalctl -u parley"} {
		if !strings.Contains(out, w) {
			t.Errorf("output does not say %q:\n%s", w, out)
		}
	}
	verifyUnit(t, path)

	// A data directory of its own and a privileged port.
	data := "/srv/parley data"
	cfg = writeConfig(t, "data_dir = \""+data+"\"\n[http]\nlisten = \"127.0.0.1:80\"\n")
	code, path, out, errOut = installService(t, t.TempDir(), "--system", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	unit = readUnit(t, path)
	wantLines(t, unit, `ReadWritePaths="/srv/parley data"`, "AmbientCapabilities=CAP_NET_BIND_SERVICE", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE")
	if strings.Contains(unit, "StateDirectory") || strings.Contains(unit, "PARLEY_DATA_DIR") {
		t.Errorf("the unit overrides the configured data directory:\n%s", unit)
	}
	if !strings.Contains(out, "mkdir -p "+data) {
		t.Errorf("output does not say to make the data directory:\n%s", out)
	}
}

func TestServiceInstallRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, "")
	path := filepath.Join(dir, unitName)
	if err := os.WriteFile(path, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, _, errOut := installService(t, dir, "--user", "--config", cfg)
	if code != exitFailed || !strings.Contains(errOut, "already exists") || !strings.Contains(errOut, "--force") {
		t.Errorf("exit %d, %q: want a refusal naming --force", code, errOut)
	}
	if readUnit(t, path) != "# mine\n" {
		t.Error("the unit was replaced")
	}
	code, _, _, errOut = installService(t, dir, "--user", "--config", cfg, "--force")
	if code != exitOK {
		t.Fatalf("--force: exit %d: %s", code, errOut)
	}
	if !strings.Contains(readUnit(t, path), "ExecStart=") {
		t.Error("--force did not replace the unit")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftovers in the unit directory: %v", entries)
	}
}

func TestServiceInstallDryRunAndRefusals(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, "")
	code, path, out, _ := installService(t, dir, "--user", "--config", cfg, "--dry-run")
	if code != exitOK || !strings.Contains(out, "would write "+path) || !strings.Contains(out, "ExecStart=") {
		t.Errorf("dry run: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the dry run wrote the unit")
	}

	// A relative configuration path becomes absolute.
	t.Chdir(filepath.Dir(cfg))
	code, _, out, _ = installService(t, dir, "--user", "--config", "parley.toml", "--dry-run")
	if code != exitOK || !strings.Contains(out, " serve --config "+cfg+"\n") {
		t.Errorf("relative config: exit %d:\n%s", code, out)
	}

	for name, args := range map[string][]string{
		"invalid configuration": {"--config", writeConfig(t, "[log]\nlevel = \"loud\"\n")},
		"missing configuration": {"--config", filepath.Join(dir, "nope.toml")},
		"both kinds":            {"--user", "--system"},
	} {
		code, path, _, errOut := installService(t, dir, args...)
		if code == exitOK {
			t.Errorf("%s: installed", name)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a unit was written", name)
		}
		t.Logf("%s: %s", name, errOut)
	}
}

// verifyUnit has systemd check the unit, where systemd-analyze is there.
func verifyUnit(t *testing.T, path string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is missing: the unit's syntax is not verified")
		return
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestServiceUnitHomePaths: a system unit hides home directories unless
// its binary, configuration or data live there, and then says how to move
// the binary out.
func TestServiceUnitHomePaths(t *testing.T) {
	s := unitSpec{system: true, exe: "/usr/local/bin/parley", config: "/etc/parley/parley.toml"}
	wantLines(t, renderUnit(s), "ProtectHome=yes")
	s.exe = "/home/ann/go/bin/parley"
	wantLines(t, renderUnit(s), "ProtectHome=read-only")
	if !strings.Contains(nextSteps(s), "install -m 0755 /home/ann/go/bin/parley /usr/local/bin/parley") {
		t.Errorf("no advice to install the binary:\n%s", nextSteps(s))
	}
	s.exe, s.dataDir = "/usr/local/bin/parley", "/root/parley-data"
	wantLines(t, renderUnit(s), "ProtectHome=read-only", "ReadWritePaths=/root/parley-data")
	// The daily backups' directory is writable too, and must be made.
	s.dataDir, s.backupDir = "", "/home/ann/parley-backups"
	wantLines(t, renderUnit(s), "ProtectHome=read-only", "StateDirectory=parley", "ReadWritePaths=/home/ann/parley-backups")
	if !strings.Contains(nextSteps(s), "mkdir -p /home/ann/parley-backups && chown parley:parley") {
		t.Errorf("no advice to make the backup directory:\n%s", nextSteps(s))
	}
	s.backupDir = ""
	// Signs systemd would expand are escaped, spaces quoted.
	s.config = "/etc/parley/100% $HOME.toml"
	wantLines(t, renderUnit(s), `ExecStart=/usr/local/bin/parley serve --config "/etc/parley/100%% $$HOME.toml"`)
}

// TestServiceUnitPrivateTmp: a system unit's PrivateTmp=yes hides /tmp
// and /var/tmp from the service, so a configuration, data directory or
// binary there gets a warning naming where to move it; a user unit has no
// private /tmp and gets none.
func TestServiceUnitPrivateTmp(t *testing.T) {
	s := unitSpec{system: true, exe: "/usr/local/bin/parley", config: "/etc/parley/parley.toml"}
	if w := privateTmpHides(s); len(w) != 0 {
		t.Errorf("warnings for paths outside /tmp: %q", w)
	}
	s.config, s.dataDir = "/tmp/parley.toml", "/var/tmp/parley"
	w := privateTmpHides(s)
	if len(w) != 2 || !strings.Contains(w[0], "the configuration /tmp/parley.toml") || !strings.Contains(w[0], "PrivateTmp=yes") ||
		!strings.Contains(w[0], "/etc/parley/parley.toml") || !strings.Contains(w[1], "the data directory /var/tmp/parley") {
		t.Errorf("warnings %q", w)
	}
	s.config, s.dataDir = "/tmpfiles/parley.toml", ""
	if w := privateTmpHides(s); len(w) != 0 {
		t.Errorf("a path that only begins like /tmp: %q", w)
	}
	s.system, s.config = false, "/tmp/parley.toml"
	if w := privateTmpHides(s); len(w) != 0 {
		t.Errorf("a user unit: %q", w)
	}
	// The command says it.
	cfg := filepath.Join("/tmp", filepath.Base(t.TempDir())+".toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Skipf("cannot write under /tmp: %v", err)
	}
	defer os.Remove(cfg)
	code, _, _, errOut := installService(t, t.TempDir(), "--system", "--config", cfg)
	if code != exitOK || !strings.Contains(errOut, "warning: the configuration "+cfg) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}
