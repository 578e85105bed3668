package matrixtest

import (
	"context"
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
