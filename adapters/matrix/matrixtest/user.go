package matrixtest

import (
	"context"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// callTimeout bounds every call the harness makes to the homeserver, so a
// stuck server fails the test rather than hanging it.
const callTimeout = 15 * time.Second

// User is an account registered on the homeserver, with its credentials.
type User struct {
	ID          id.UserID
	Password    string
	AccessToken string
	DeviceID    id.DeviceID
}

// Register creates the account @localpart:ServerName through the client
// API's registration (m.login.dummy, as open registration allows) and
// returns it logged in on a new device. The password is derived from the
// localpart so that a test can log in again.
func (h *Homeserver) Register(tb testing.TB, localpart string) *User {
	tb.Helper()
	cli, err := mautrix.NewClient(h.URL, "", "")
	if err != nil {
		tb.Fatalf("matrix client for %s: %v", h.URL, err)
	}
	password := "parley-test-" + localpart
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := cli.RegisterDummy(ctx, &mautrix.ReqRegister[any]{
		Username:                 localpart,
		Password:                 password,
		InitialDeviceDisplayName: "matrixtest",
	})
	if err != nil {
		tb.Fatalf("register %s: %v", localpart, err)
	}
	return &User{ID: resp.UserID, Password: password, AccessToken: resp.AccessToken, DeviceID: resp.DeviceID}
}

// Client returns a plain mautrix client for the user on hsURL — the
// homeserver's URL, or a [Proxy]'s to go through it.
func (u *User) Client(tb testing.TB, hsURL string) *mautrix.Client {
	tb.Helper()
	cli, err := mautrix.NewClient(hsURL, u.ID, u.AccessToken)
	if err != nil {
		tb.Fatalf("matrix client for %s: %v", u.ID, err)
	}
	cli.DeviceID = u.DeviceID
	return cli
}
