package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

// Pairing for the operator (commands/pairing.go has the design): the
// running daemon serves the codes at /api/pairing (with the token, like the
// rest of /api), and `parley pairing` is its client, so the data directory,
// which the daemon holds locked, is never opened twice.

// pairingWaiting is a code waiting for the operator, as the API shows it.
type pairingWaiting struct {
	Code     string      `json:"code"`
	Platform core.Origin `json:"platform"`
	User     string      `json:"user"`
	Name     string      `json:"name,omitempty"`
	Created  time.Time   `json:"created"`
}

// pairingAdmitted is a person admitted by a pairing, as the API shows it.
type pairingAdmitted struct {
	Platform core.Origin `json:"platform"`
	User     string      `json:"user"`
	Name     string      `json:"name,omitempty"`
	Code     string      `json:"code"`
	Approved time.Time   `json:"approved"`
}

type pairingList struct {
	Waiting  []pairingWaiting  `json:"waiting"`
	Admitted []pairingAdmitted `json:"admitted"`
}

// pairingHandler serves GET /api/pairing and POST
// /api/pairing/{code}/approve|deny.
func pairingHandler(svc *commands.Service) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/pairing", func(w http.ResponseWriter, r *http.Request) {
		reqs, adm, err := svc.Pairings(r.Context())
		if err != nil {
			pairingFail(w, err)
			return
		}
		out := pairingList{Waiting: []pairingWaiting{}, Admitted: []pairingAdmitted{}}
		for _, p := range reqs {
			out.Waiting = append(out.Waiting, pairingWaiting{Code: p.Code, Platform: p.Origin, User: p.Actor.ID, Name: p.Actor.Name, Created: p.Created})
		}
		for _, a := range adm {
			out.Admitted = append(out.Admitted, pairingAdmitted{Platform: a.Origin, User: a.Actor.ID, Name: a.Actor.Name, Code: a.Code, Approved: a.Approved})
		}
		writeJSONBody(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /api/pairing/{code}/approve", func(w http.ResponseWriter, r *http.Request) {
		a, err := svc.ApprovePairing(r.Context(), r.PathValue("code"))
		if err != nil {
			pairingFail(w, err)
			return
		}
		writeJSONBody(w, http.StatusOK, pairingAdmitted{Platform: a.Origin, User: a.Actor.ID, Name: a.Actor.Name, Code: a.Code, Approved: a.Approved})
	})
	mux.HandleFunc("POST /api/pairing/{code}/deny", func(w http.ResponseWriter, r *http.Request) {
		p, err := svc.DenyPairing(r.Context(), r.PathValue("code"))
		if err != nil {
			pairingFail(w, err)
			return
		}
		writeJSONBody(w, http.StatusOK, pairingWaiting{Code: p.Code, Platform: p.Origin, User: p.Actor.ID, Name: p.Actor.Name, Created: p.Created})
	})
	return mux
}

func pairingFail(w http.ResponseWriter, err error) {
	msg, ok := core.UserMessage(err)
	status := http.StatusInternalServerError
	switch {
	case !ok:
	case errors.Is(err, core.ErrNotFound):
		status = http.StatusNotFound
	default:
		status = http.StatusBadRequest
	}
	writeJSONBody(w, status, map[string]string{"error": msg})
}

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

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
	c := pairingClient{base: strings.TrimSuffix(*base, "/"), token: *token}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch verb {
	case "list":
		var l pairingList
		if err := c.do(ctx, http.MethodGet, "/api/pairing", &l); err != nil {
			fmt.Fprintln(stderr, "parley pairing:", err)
			return exitFailed
		}
		printPairings(stdout, l)
	case "approve":
		var a pairingAdmitted
		if err := c.do(ctx, http.MethodPost, "/api/pairing/"+url.PathEscape(rest[0])+"/approve", &a); err != nil {
			fmt.Fprintln(stderr, "parley pairing:", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "admitted %s (%s) on %s; they were told to write again\n", a.User, a.Name, a.Platform)
	case "deny":
		var p pairingWaiting
		if err := c.do(ctx, http.MethodPost, "/api/pairing/"+url.PathEscape(rest[0])+"/deny", &p); err != nil {
			fmt.Fprintln(stderr, "parley pairing:", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "dropped code %s of %s (%s) on %s\n", p.Code, p.User, p.Name, p.Platform)
	}
	return exitOK
}

func printPairings(w io.Writer, l pairingList) {
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

// pairingClient calls the daemon's pairing API.
type pairingClient struct{ base, token string }

func (c pairingClient) do(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if method != http.MethodGet {
		// The daemon takes changes only as JSON (guard.go); these carry
		// no body.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("is parley running at %s? %w", c.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return json.Unmarshal(body, out)
}
