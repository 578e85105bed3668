package memnet_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/memnet"
)

// TestHTTPOnFakeClock: an HTTP server and its client on one Network, in a
// bubble: a handler that waits a minute answers after exactly a minute of
// the bubble's clock, and once the network is closed nothing of either is
// left running (synctest.Test would fail on a goroutine still blocked).
func TestHTTPOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		ln := n.Host().Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Minute)
			_, _ = io.WriteString(w, "late")
		})}
		go func() { _ = srv.Serve(ln) }()
		start := time.Now()
		resp, err := n.Host().Client().Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "late" || time.Since(start) != time.Minute {
			t.Errorf("got %q after %v, want %q after exactly 1m", body, time.Since(start), "late")
		}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

// TestDialRefused: an address nobody listens at, or a closed listener's,
// is refused at once, as a closed port is.
func TestDialRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		ln := n.Host().Listen()
		ln.Close()
		for _, addr := range []string{ln.Addr().String(), "127.0.0.1:1"} {
			if _, err := n.Host().DialContext(context.Background(), "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dial %s: %v, want connection refused", addr, err)
			}
		}
	})
}

// TestKill: a killed host's connections are cut at both ends, whoever
// dialed them, its listeners refuse, and it can dial no more; the other
// hosts' connections stay up.
func TestKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		server, victim, other := n.Host(), n.Host(), n.Host()
		ln, own := server.Listen(), victim.Listen()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { _, _ = io.Copy(c, c); c.Close() }()
			}
		}()
		ctx := context.Background()
		dialed, err := victim.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		kept, err := other.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		victim.Kill()
		if _, err := dialed.Read(make([]byte, 1)); err == nil {
			t.Error("a connection the killed host dialed is still open")
		}
		if _, err := own.Accept(); err == nil {
			t.Error("the killed host's listener still accepts")
		}
		if _, err := victim.DialContext(ctx, "tcp", ln.Addr().String()); err == nil {
			t.Error("the killed host could dial")
		}
		if _, err := other.DialContext(ctx, "tcp", own.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dialing the killed host's address: %v, want connection refused", err)
		}
		go func() { _, _ = kept.Write([]byte("x")) }()
		buf := make([]byte, 1)
		if _, err := kept.Read(buf); err != nil || buf[0] != 'x' {
			t.Errorf("another host's connection: read %q, %v; want the echo", buf, err)
		}
		ln.Close()
		kept.Close()
	})
}

// TestListenOn: a host listens again at an address once its last listener
// there closed, as a restarted process does; while one listens there,
// another cannot.
func TestListenOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		first := n.Host().Listen()
		if _, err := n.Host().ListenOn(first.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("listening where another listens: %v, want address in use", err)
		}
		first.Close()
		again, err := n.Host().ListenOn(first.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := again.Accept()
			if err == nil {
				c.Close()
			}
		}()
		c, err := n.Host().DialContext(context.Background(), "tcp", first.Addr().String())
		if err != nil {
			t.Fatalf("dialing the address listened on again: %v", err)
		}
		c.Close()
		again.Close()
	})
}
