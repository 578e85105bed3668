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
		ln := n.Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Minute)
			_, _ = io.WriteString(w, "late")
		})}
		go func() { _ = srv.Serve(ln) }()
		start := time.Now()
		resp, err := n.Client().Get("http://" + ln.Addr().String() + "/")
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
		ln := n.Listen()
		ln.Close()
		for _, addr := range []string{ln.Addr().String(), "127.0.0.1:1"} {
			if _, err := n.DialContext(context.Background(), "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dial %s: %v, want connection refused", addr, err)
			}
		}
	})
}
