package matrixtest

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A fresh Dendrite answers, and an account registered through the client
// API is who its token says.
func TestDendriteRegister(t *testing.T) {
	hs := Dendrite(t)
	u := hs.Register(t, "alice")
	if want := "@alice:" + hs.ServerName; string(u.ID) != want {
		t.Fatalf("registered %s, want %s", u.ID, want)
	}
	resp, err := u.Client(t, hs.URL).Whoami(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if resp.UserID != u.ID || resp.DeviceID != u.DeviceID {
		t.Fatalf("whoami %s/%s, want %s/%s", resp.UserID, resp.DeviceID, u.ID, u.DeviceID)
	}
}

// A Dendrite told to bind a port that another homeserver holds is not
// taken for ready because that one answers there: it exits, and start says
// that the port was taken, so that Dendrite retries on another one.
func TestDendriteOnATakenPort(t *testing.T) {
	other := Dendrite(t)
	bin := BinDir()
	h, cfgPath := configure(t, bin)
	err := h.start(t, bin, cfgPath, strings.TrimPrefix(other.URL, "http://"))
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("start on the port of %s: %v, want %v", other.URL, err, errPortTaken)
	}
}
