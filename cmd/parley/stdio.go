package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/channel"
)

// stdioProxy is `parley mcp`: MCP over stdio for agents that only launch
// local servers, relayed to the running daemon's /mcp. The daemon's address
// and token come from the same configuration as serve's unless given; an
// agent parley runs has its session's credential in PARLEY_SESSION_TOKEN
// (mcp.AgentTokenEnv), which the proxy sends instead of the token.
// stdout carries the protocol; logs go to stderr. With --channel it is a
// Claude Code channel of one session instead (package mcp/channel).
func stdioProxy(ctx context.Context, args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "TOML configuration `file` (PARLEY_CONFIG)")
	url := fs.String("url", "", "the daemon's MCP `URL` (default http://<http.listen>/mcp)")
	token := fs.String("token", "", "bearer `token` (default http.token)")
	session := fs.String("session", "", "bind the connection to session `ID`")
	asChannel := fs.Bool("channel", false, "serve Claude Code as a channel of one session (--session, or a new one titled --title)")
	title := fs.String("title", "", "with --channel and no --session: the `title` of the session to create")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *title != "" && (!*asChannel || *session != "") {
		fmt.Fprintln(stderr, "parley mcp: --title names the session --channel creates; it needs --channel and no --session")
		return exitUsage
	}
	if *configPath == "" {
		*configPath = lookup(env, "PARLEY_CONFIG")
	}
	cfg, err := loadConfig(*configPath, env)
	if err != nil {
		fmt.Fprintf(stderr, "parley: invalid configuration:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	if *url == "" {
		*url = "http://" + dialable(cfg.HTTP.Listen) + "/mcp"
	}
	if *token == "" {
		*token = cfg.HTTP.Token
	}
	if *asChannel {
		log := newLogger(cfg.Log, stderr).With("component", "mcp-channel")
		opts := channel.Options{URL: *url, Token: *token, Session: core.SessionID(*session), Title: *title,
			Version: Version(), Logger: log,
			OnSession: func(id core.SessionID) {
				// stdout is the protocol: the session goes to stderr,
				// whatever the log level, so people can come back to it.
				fmt.Fprintf(stderr, "parley mcp --channel: session %s\n", id)
			}}
		if err := channel.Serve(ctx, opts, stdin, stdout); err != nil && ctx.Err() == nil {
			log.Error("channel stopped", "url", *url, "err", err)
			return exitFailed
		}
		return exitOK
	}
	log := newLogger(cfg.Log, stderr).With("component", "mcp-proxy")
	// An agent parley runs reaches its session with the credential it was
	// given in its environment, never with the [http] token.
	opts := mcp.ProxyOptions{URL: *url, Token: *token, Session: *session, AgentToken: lookup(env, mcp.AgentTokenEnv), Logger: log}
	if err := mcp.Proxy(ctx, opts, stdin, stdout); err != nil && ctx.Err() == nil {
		log.Error("proxy stopped", "url", *url, "err", err)
		return exitFailed
	}
	return exitOK
}

// dialable turns a listen address into one to connect to: a wildcard host
// becomes loopback.
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
