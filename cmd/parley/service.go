package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

// unitName is the systemd unit parley service install writes.
const unitName = "parley.service"

// systemUser is the account a system unit runs parley as.
const systemUser = "parley"

// service is `parley service install [--user|--system] [--config FILE]
// [--dry-run] [--force] [--unit-dir DIR]`: it writes a systemd unit that
// runs `parley serve --config FILE` with absolute paths, restarts it on
// failure and stops it gracefully (SIGTERM, then as long as serve's drain
// may take), and prints the commands that enable and start it.
//
// A user unit (the default unless run as root) runs as the person, in
// ~/.config/systemd/user. A system unit (/etc/systemd/system) runs as the
// dedicated user parley with the sandboxing a network daemon that only
// writes its data directory can take: NoNewPrivileges, ProtectSystem=strict
// with the data directory the one writable path (StateDirectory=parley,
// /var/lib/parley, unless the configuration names another) besides [store]
// backup_dir when one is set, no
// capabilities but binding a port below 1024 when the address needs it.
//
// The configuration is loaded first: a unit that would fail at once is not
// written. An existing unit is never replaced without --force, and then
// atomically (a rename), so a failed write leaves the old one.
func service(args, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "install" {
		fmt.Fprintln(stderr, "Usage: parley service install [--user|--system] [--config FILE] [--dry-run] [--force] [--unit-dir DIR]")
		return exitUsage
	}
	fs := flag.NewFlagSet("parley service install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asUser := fs.Bool("user", false, "install a user unit, run as you (default unless root)")
	asSystem := fs.Bool("system", false, "install a system unit, run as the user "+systemUser+" (default as root)")
	configPath := fs.String("config", "", "the configuration `file` the service runs with (PARLEY_CONFIG)")
	dryRun := fs.Bool("dry-run", false, "print the unit and where it would go; write nothing")
	force := fs.Bool("force", false, "replace an existing unit")
	unitDir := fs.String("unit-dir", "", "write the unit into `DIR` instead of systemd's directory (packaging, tests)")
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "parley service install: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *asUser && *asSystem {
		fmt.Fprintln(stderr, "parley service install: --user and --system exclude each other")
		return exitUsage
	}
	system := *asSystem || (!*asUser && os.Geteuid() == 0)
	if *configPath == "" {
		*configPath = lookup(env, "PARLEY_CONFIG")
	}
	spec, err := unitFor(system, *configPath, env)
	if err != nil {
		fmt.Fprintf(stderr, "parley service install: %v\n", err)
		return exitUsage
	}
	dir := *unitDir
	if dir == "" {
		if dir, err = systemdDir(system, env); err != nil {
			fmt.Fprintf(stderr, "parley service install: %v\n", err)
			return exitUsage
		}
	}
	path, err := filepath.Abs(filepath.Join(dir, unitName))
	if err != nil {
		fmt.Fprintf(stderr, "parley service install: %v\n", err)
		return exitUsage
	}
	for _, w := range privateTmpHides(spec) {
		fmt.Fprintf(stderr, "parley service install: warning: %s\n", w)
	}
	unit := renderUnit(spec)
	if *dryRun {
		fmt.Fprintf(stdout, "# parley service install --dry-run: would write %s\n%s", path, unit)
		return exitOK
	}
	if err := installUnit(path, []byte(unit), *force); err != nil {
		fmt.Fprintf(stderr, "parley service install: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s\n\n%s", path, nextSteps(spec))
	return exitOK
}

// unitSpec is what a unit says.
type unitSpec struct {
	system bool
	exe    string // parley's absolute path
	config string // the configuration's absolute path; "" for none
	// dataDir is the data directory a system unit must let parley write,
	// when the configuration names one; "" uses StateDirectory.
	dataDir string
	// backupDir is [store] backup_dir, which a system unit must let
	// parley write its daily backups to; "" for none.
	backupDir string
	// stopTimeout bounds a graceful stop.
	stopTimeout time.Duration
	// lowPort: the listen port needs CAP_NET_BIND_SERVICE.
	lowPort bool
}

// unitFor loads the configuration (a unit that would fail at start is not
// worth writing) and works out what the unit needs.
func unitFor(system bool, configPath string, env []string) (unitSpec, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return unitSpec{}, fmt.Errorf("cannot find parley's own path: %w", err)
	}
	s := unitSpec{system: system, exe: exe}
	if configPath != "" {
		if s.config, err = filepath.Abs(configPath); err != nil {
			return unitSpec{}, err
		}
		if _, err := os.Stat(s.config); err != nil {
			return unitSpec{}, fmt.Errorf("%w: write one with parley init %s", err, s.config)
		}
	}
	// The service does not get this shell's PARLEY_* variables: check the
	// file alone, as the service will read it.
	var clean []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PARLEY_") {
			clean = append(clean, kv)
		}
	}
	cfg, err := loadConfig(s.config, clean)
	if err != nil {
		return unitSpec{}, fmt.Errorf("the service would not start: its configuration is invalid:\n%s\nfix it (parley doctor --config %s shows each problem), then run this again",
			indent(err.Error()), s.config)
	}
	// serve drains the outbox for drain_timeout and then stops its HTTP
	// server within 5s; systemd waits that and a margin before SIGKILL.
	s.stopTimeout = cfg.Outbox.DrainTimeout.Duration + 5*time.Second + 10*time.Second
	if _, port, err := net.SplitHostPort(cfg.HTTP.Listen); err == nil {
		if p, err := strconv.Atoi(port); err == nil && p > 0 && p < 1024 {
			s.lowPort = true
		}
	}
	if system && cfg.DataDir != config.DefaultDataDir(clean) {
		// The default is under the installing user's home, not the
		// service's: a system unit uses StateDirectory instead.
		s.dataDir = cfg.DataDir
	}
	if system && cfg.Store.URL == "" {
		s.backupDir = cfg.Store.BackupDir
	}
	return s, nil
}

// systemdDir is where systemd looks for units of the kind.
func systemdDir(system bool, env []string) (string, error) {
	if system {
		return "/etc/systemd/system", nil
	}
	if x := lookup(env, "XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "systemd", "user"), nil
	}
	if h := lookup(env, "HOME"); h != "" {
		return filepath.Join(h, ".config", "systemd", "user"), nil
	}
	return "", fmt.Errorf("neither XDG_CONFIG_HOME nor HOME is set: give the unit directory with --unit-dir")
}

// renderUnit writes the unit file.
func renderUnit(s unitSpec) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Written by parley service install (parley %s).", Version())
	w("[Unit]")
	w("Description=parley: AI agent sessions where people chat")
	w("Documentation=https://github.com/parley-chat/parley#running-as-a-service")
	w("Wants=network-online.target")
	w("After=network-online.target")
	w("")
	w("[Service]")
	w("Type=exec")
	cmd := []string{s.exe, "serve"}
	if s.config != "" {
		cmd = append(cmd, "--config", s.config)
	}
	for i, a := range cmd {
		cmd[i] = unitQuote(a)
	}
	w("ExecStart=%s", strings.Join(cmd, " "))
	w("# Restart after a crash or a failed start, not after a clean stop.")
	w("Restart=on-failure")
	w("RestartSec=5s")
	w("# parley stops gracefully on SIGTERM: it stops taking input, drains the")
	w("# outbox for [outbox] drain_timeout, then closes its store.")
	w("KillSignal=SIGTERM")
	w("KillMode=mixed")
	w("TimeoutStopSec=%s", strconv.Itoa(int(s.stopTimeout.Seconds()))+"s")
	w("NoNewPrivileges=yes")
	w("UMask=0077")
	if !s.system {
		w("")
		w("[Install]")
		w("WantedBy=default.target")
		return b.String()
	}
	w("User=%s", systemUser)
	w("Group=%s", systemUser)
	if s.dataDir == "" {
		w("# The data directory: /var/lib/parley, made and owned for the service.")
		w("StateDirectory=parley")
		w("StateDirectoryMode=0700")
		w("Environment=PARLEY_DATA_DIR=%%S/parley")
	} else {
		w("# The data directory the configuration names, the one writable path.")
		w("ReadWritePaths=%s", unitQuote(s.dataDir))
	}
	if s.backupDir != "" {
		w("# [store] backup_dir, where it takes its daily backups.")
		w("ReadWritePaths=%s", unitQuote(s.backupDir))
	}
	w("# Sandboxing: parley talks HTTP and writes only the directories above.")
	w("ProtectSystem=strict")
	home := "yes"
	for _, p := range []string{s.exe, s.config, s.dataDir, s.backupDir} {
		if underHome(p) {
			home = "read-only" // its binary, configuration or data live there
		}
	}
	w("ProtectHome=%s", home)
	w("PrivateTmp=yes")
	w("PrivateDevices=yes")
	w("ProtectKernelTunables=yes")
	w("ProtectKernelModules=yes")
	w("ProtectKernelLogs=yes")
	w("ProtectControlGroups=yes")
	w("ProtectClock=yes")
	w("ProtectHostname=yes")
	w("RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX")
	w("RestrictNamespaces=yes")
	w("RestrictRealtime=yes")
	w("RestrictSUIDSGID=yes")
	w("LockPersonality=yes")
	w("MemoryDenyWriteExecute=yes")
	w("SystemCallArchitectures=native")
	w("SystemCallFilter=@system-service")
	if s.lowPort {
		w("# [http] listen has a port below 1024.")
		w("AmbientCapabilities=CAP_NET_BIND_SERVICE")
		w("CapabilityBoundingSet=CAP_NET_BIND_SERVICE")
	} else {
		w("CapabilityBoundingSet=")
	}
	w("")
	w("[Install]")
	w("WantedBy=multi-user.target")
	return b.String()
}

// privateTmpHides warns of the paths a system unit needs (its binary,
// configuration, data directory) that lie under /tmp or /var/tmp: the
// unit's PrivateTmp=yes gives the service empty directories of its own
// there, so it would not find them. The unit is written all the same (a
// packager may install the files elsewhere later); the warning says what
// to move where.
func privateTmpHides(s unitSpec) []string {
	if !s.system {
		return nil
	}
	var out []string
	for _, p := range []struct{ what, path, to string }{
		{"parley's binary", s.exe, "/usr/local/bin/parley"},
		{"the configuration", s.config, "/etc/parley/parley.toml"},
		{"the data directory", s.dataDir, "/var/lib/parley"},
	} {
		if underTmp(p.path) {
			out = append(out, fmt.Sprintf("%s %s is under a temporary directory, which the unit's PrivateTmp=yes replaces with an empty one for the service: it would not find it; move it (to %s, say) and run this again",
				p.what, p.path, p.to))
		}
	}
	return out
}

// underTmp reports whether a path is below a directory PrivateTmp=yes
// replaces.
func underTmp(p string) bool {
	for _, dir := range []string{"/tmp", "/var/tmp"} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// underHome reports whether a path is below a directory ProtectHome=yes
// hides.
func underHome(p string) bool {
	for _, h := range []string{"/home/", "/root/", "/run/user/"} {
		if strings.HasPrefix(p, h) {
			return true
		}
	}
	return false
}

// unitQuote writes one word of a unit's command line or path setting:
// quoted when it holds spaces, quotes or backslashes, and with the
// specifier (%) and variable ($) signs escaped, which systemd would expand.
func unitQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	s = strings.ReplaceAll(s, "$", "$$")
	if !strings.ContainsAny(s, " \t\"'\\") {
		return s
	}
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`
}

// installUnit writes the unit: a new file, or with force a replacement
// renamed over the old one.
func installUnit(path string, unit []byte, force bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if !force {
		if err := writeNew(path, unit, 0o644); errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w; it is left as it was: pass --force to replace it", err)
		} else if err != nil {
			return err
		}
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+unitName+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(unit); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// nextSteps says how to enable and start the unit, and what a system unit
// needs first.
func nextSteps(s unitSpec) string {
	var b strings.Builder
	if !s.system {
		b.WriteString("Enable and start it, and follow its log:\n")
		b.WriteString("  systemctl --user daemon-reload\n")
		b.WriteString("  systemctl --user enable --now " + unitName + "\n")
		b.WriteString("  journalctl --user -u parley -f\n")
		b.WriteString("To keep it running while you are logged out:\n")
		b.WriteString("  loginctl enable-linger\n")
		return b.String()
	}
	if underHome(s.exe) {
		b.WriteString("parley's binary is in a home directory, which the user " + systemUser + " may not reach: install it\n")
		b.WriteString("  install -m 0755 " + s.exe + " /usr/local/bin/parley\n")
		b.WriteString("and run /usr/local/bin/parley service install again, or edit ExecStart.\n")
	}
	if _, err := user.Lookup(systemUser); err != nil {
		b.WriteString("Create the user it runs as:\n")
		b.WriteString("  useradd --system --no-create-home --shell /usr/sbin/nologin " + systemUser + "\n")
	}
	if s.config != "" {
		b.WriteString("Let it read its configuration (which holds tokens) and nobody else:\n")
		b.WriteString(fmt.Sprintf("  chown root:%s %s && chmod 0640 %s\n", systemUser, s.config, s.config))
	}
	if s.dataDir != "" {
		b.WriteString("Give it its data directory:\n")
		b.WriteString(fmt.Sprintf("  mkdir -p %s && chown %s:%s %s && chmod 0700 %s\n", s.dataDir, systemUser, systemUser, s.dataDir, s.dataDir))
	}
	if s.backupDir != "" {
		b.WriteString("Give it its backup directory (systemd refuses to start a unit whose ReadWritePaths is missing):\n")
		b.WriteString(fmt.Sprintf("  mkdir -p %s && chown %s:%s %s && chmod 0700 %s\n", s.backupDir, systemUser, systemUser, s.backupDir, s.backupDir))
	}
	b.WriteString("Enable and start it, and follow its log:\n")
	b.WriteString("  systemctl daemon-reload\n")
	b.WriteString("  systemctl enable --now " + unitName + "\n")
	b.WriteString("  journalctl -u parley -f\n")
	return b.String()
}
