package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/parley-chat/parley/adapters/web"
)

// `parley pairing` is the operator's client of the running daemon's
// pairing API (adapters/web/pairing.go), so the data directory, which the
// daemon holds locked, is never opened twice; commands/pairing.go has the
// design.

const pairingUsage = `Usage:
  parley pairing list               codes waiting for you, and who was admitted
  parley pairing approve CODE       admit the person who was given CODE
  parley pairing deny CODE          drop CODE; its person is not told
Flags (before the verb's arguments): --config FILE, --url URL (default http://<http.listen>), --token TOKEN (default http.token)
Pairing must be on in the running daemon: [access] pairing = true.
`

// pairingCmd is `parley pairing`, a client of the running daemon.
func pairingCmd(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley pairing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, pairingUsage) }
	configPath := fs.String("config", "", "TOML configuration `file` (PARLEY_CONFIG)")
	base := fs.String("url", "", "the daemon's `URL` (default http://<http.listen>)")
	token := fs.String("token", "", "bearer `token` (default http.token)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	verb, rest := fs.Arg(0), fs.Args()
	if len(rest) > 0 {
		rest = rest[1:]
	}
	switch {
	case verb == "list" && len(rest) == 0, (verb == "approve" || verb == "deny") && len(rest) == 1:
	default:
		fmt.Fprint(stderr, pairingUsage)
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
	if *base == "" {
		*base = "http://" + dialable(cfg.HTTP.Listen)
	}
	if *token == "" {
		*token = cfg.HTTP.Token
	}
	c := web.PairingClient{Base: *base, Token: *token}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch verb {
	case "list":
		l, err := c.List(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "parley pairing:", err)
			return exitFailed
		}
		printPairings(stdout, l)
	case "approve":
		a, err := c.Approve(ctx, rest[0])
		if err != nil {
			fmt.Fprintln(stderr, "parley pairing:", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "admitted %s (%s) on %s; they were told to write again\n", a.User, a.Name, a.Platform)
	case "deny":
		p, err := c.Deny(ctx, rest[0])
		if err != nil {
			fmt.Fprintln(stderr, "parley pairing:", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "dropped code %s of %s (%s) on %s\n", p.Code, p.User, p.Name, p.Platform)
	}
	return exitOK
}

func printPairings(w io.Writer, l web.PairingList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(l.Waiting) == 0 {
		fmt.Fprintln(tw, "No pairing codes are waiting.")
	} else {
		fmt.Fprintln(tw, "CODE\tPLATFORM\tUSER\tNAME\tASKED")
		for _, p := range l.Waiting {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Code, p.Platform, p.User, p.Name, p.Created.Local().Format(time.DateTime))
		}
	}
	if len(l.Admitted) > 0 {
		fmt.Fprintln(tw, "\nADMITTED\tPLATFORM\tUSER\tNAME\tAPPROVED")
		for _, a := range l.Admitted {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Code, a.Platform, a.User, a.Name, a.Approved.Local().Format(time.DateTime))
		}
	}
	_ = tw.Flush()
}
