package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/core"
)

// cursorLogin keeps what a password login gave (see login).
const cursorLogin = "matrix.login"

// storedLogin is a password login's result, kept in the store so that
// parley logs in once rather than at every start (each login makes a new
// device on the account). It is reused only for the same homeserver and
// user.
type storedLogin struct {
	Homeserver  string      `json:"homeserver"`
	UserID      id.UserID   `json:"user_id"`
	AccessToken string      `json:"access_token"`
	DeviceID    id.DeviceID `json:"device_id"`
}

// Check verifies the configuration against the homeserver before parley
// starts: the homeserver answers /versions (and offers authenticated
// media, without which files cannot be fetched), the bot can log in (the
// configured token, or a password's token kept in the store), and whoami
// names the configured user. Its errors say what to fix; none quotes a
// token or a password. The homeserver's refusals (an unknown token, a
// wrong password, another account's token) are core.Permanent, so the
// daemon retries them slowly; a homeserver that does not answer is not.
func (a *Adapter) Check(ctx context.Context) error {
	vers, err := a.cli.Versions(ctx)
	if err != nil {
		return core.WithFix(fmt.Errorf("matrix: cannot reach the homeserver at %s (/versions: %v)", a.opts.Homeserver, err),
			"check [matrix] homeserver (PARLEY_MATRIX_HOMESERVER), the client-server API's base URL, and that this machine reaches it; parley serve keeps serving without Matrix and tries again")
	}
	if !vers.Supports(mautrix.FeatureAuthenticatedMedia) {
		a.log.Warn("the homeserver does not offer authenticated media (spec v1.11); files people send cannot be fetched",
			"versions", len(vers.Versions))
	}
	if err := a.login(ctx, false); err != nil {
		return err
	}
	who, err := a.cli.Whoami(ctx)
	if errors.Is(err, mautrix.MUnknownToken) && a.opts.AccessToken == "" {
		// The stored login was logged out: log in again, once.
		if err := a.login(ctx, true); err != nil {
			return err
		}
		who, err = a.cli.Whoami(ctx)
	}
	switch {
	case errors.Is(err, mautrix.MUnknownToken) && a.opts.AccessToken != "":
		return core.Permanent(errors.New("matrix: the homeserver does not know the access token: set [matrix] access_token (PARLEY_MATRIX_ACCESS_TOKEN) to a valid token of the bot, or use password instead"))
	case err != nil:
		return core.WithFix(classify("whoami", opOther, err, false),
			"check [matrix] user_id and its access_token or password; if the homeserver did not answer, check that this machine reaches "+a.opts.Homeserver)
	case who.UserID != a.opts.UserID:
		return core.Permanent(fmt.Errorf("matrix: the access token belongs to %s, not to %s: fix [matrix] user_id or access_token so they name the same account", who.UserID, a.opts.UserID))
	}
	a.ready.Store(true)
	// Run follows: keyed sends wait for its first sync (see waitFirstSync).
	a.echo.armed.Store(true)
	a.log.Info("connected to Matrix", "homeserver", a.opts.Homeserver, "user", who.UserID, "spec", vers.GetLatest().String())
	return nil
}

// login sets the client's token: the configured one, else the one a
// password login left in the store, else (or when again is set) a new
// password login, kept in the store.
func (a *Adapter) login(ctx context.Context, again bool) error {
	if a.opts.AccessToken != "" {
		a.token.Store(new(a.opts.AccessToken))
		return nil
	}
	if !again {
		v, err := a.opts.Cursors.Cursor(ctx, cursorLogin)
		if err != nil {
			return core.WithFix(fmt.Errorf("matrix: read the stored login: %w", err), "check parley's data directory (data_dir) and its log")
		}
		var l storedLogin
		if v != "" && json.Unmarshal([]byte(v), &l) == nil && l.Homeserver == a.opts.Homeserver && l.UserID == a.opts.UserID && l.AccessToken != "" {
			a.token.Store(new(l.AccessToken))
			return nil
		}
	}
	resp, err := a.cli.Login(ctx, &mautrix.ReqLogin{
		Type:                     mautrix.AuthTypePassword,
		Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: string(a.opts.UserID)},
		Password:                 a.opts.Password,
		InitialDeviceDisplayName: "parley",
	})
	switch {
	case errors.Is(err, mautrix.MForbidden):
		return core.Permanent(fmt.Errorf("matrix: the homeserver refused the password of %s: check [matrix] password (PARLEY_MATRIX_PASSWORD) and user_id", a.opts.UserID))
	case err != nil:
		return core.WithFix(classify("log in as "+string(a.opts.UserID), opOther, err, false),
			"check [matrix] user_id and password; if the homeserver did not answer, check that this machine reaches "+a.opts.Homeserver)
	}
	b, _ := json.Marshal(storedLogin{Homeserver: a.opts.Homeserver, UserID: resp.UserID, AccessToken: resp.AccessToken, DeviceID: resp.DeviceID})
	if err := a.opts.Cursors.SetCursor(ctx, cursorLogin, string(b)); err != nil {
		return core.WithFix(fmt.Errorf("matrix: keep the login in the store: %w", err), "check parley's data directory (data_dir) and its log")
	}
	a.token.Store(new(resp.AccessToken))
	a.log.Info("logged in to Matrix with the password; the token is kept in parley's store", "user", resp.UserID)
	return nil
}
