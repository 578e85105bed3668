package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	if err := a.login(ctx, ""); err != nil {
		return err
	}
	tok := *a.token.Load()
	who, err := a.cli.Whoami(ctx)
	if errors.Is(err, mautrix.MUnknownToken) && a.opts.AccessToken == "" {
		// The stored login was logged out: log in again, once.
		if err := a.login(ctx, tok); err != nil {
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
// password login left in the store, else (or when that is forgotten, the
// token the homeserver no longer knows) a new password login, kept in the
// store.
//
// Instances sharing the store share that login, one device of the
// account: a password login happens under the lease LoginLeaseName, after
// reading the store again, so that instances starting together log in
// once, and after the homeserver forgot the token the first to notice logs
// in again while the others take the token it stored.
func (a *Adapter) login(ctx context.Context, forgotten string) error {
	if a.opts.AccessToken != "" {
		a.token.Store(new(a.opts.AccessToken))
		return nil
	}
	if forgotten == "" {
		if tok, err := a.storedToken(ctx); err != nil || tok != "" {
			if tok != "" {
				a.token.Store(new(tok))
			}
			return err
		}
	}
	held, err := core.Hold(ctx, a.opts.Leases, LoginLeaseName(a.opts.UserID), core.HoldOptions{Logger: a.log})
	if err != nil {
		return fmt.Errorf("matrix: log in: %w", err)
	}
	defer held.Release(context.WithoutCancel(ctx))
	ctx = held.Context()
	if tok, err := a.storedToken(ctx); err != nil || tok != "" && tok != forgotten {
		if tok != "" {
			a.token.Store(new(tok))
		}
		return err
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
	if err := a.opts.Leases.SetCursorFenced(ctx, cursorLogin, string(b), held.Lease()); err != nil {
		return core.WithFix(fmt.Errorf("matrix: keep the login in the store: %w", err), "check parley's data directory (data_dir) and its log")
	}
	a.token.Store(new(resp.AccessToken))
	a.log.Info("logged in to Matrix with the password; the token is kept in parley's store", "user", resp.UserID)
	return nil
}

// LoginLeaseName is the lease a password login of the account user
// happens under.
func LoginLeaseName(user id.UserID) string { return "matrix-login/" + string(user) }

// storedToken is the access token a password login left in the store for
// this homeserver and user, or "".
func (a *Adapter) storedToken(ctx context.Context) (string, error) {
	v, err := a.opts.Cursors.Cursor(ctx, cursorLogin)
	if err != nil {
		return "", core.WithFix(fmt.Errorf("matrix: read the stored login: %w", err), "check parley's data directory (data_dir) and its log")
	}
	var l storedLogin
	if v != "" && json.Unmarshal([]byte(v), &l) == nil && l.Homeserver == a.opts.Homeserver && l.UserID == a.opts.UserID {
		return l.AccessToken, nil
	}
	return "", nil
}

// adoptStored is called when the homeserver refused forgotten, the token a
// request carried (401): when another instance has logged in again since,
// its token, kept in the store, is taken for the next requests. Logging in
// again is left to the sync and Check, which see the refusal themselves.
func (a *Adapter) adoptStored(forgotten string) {
	ctx, cancel := context.WithTimeout(context.Background(), adoptTimeout)
	defer cancel()
	if tok, err := a.storedToken(ctx); err == nil && tok != "" && tok != forgotten {
		if cur := a.token.Load(); *cur == forgotten {
			a.token.CompareAndSwap(cur, new(tok))
		}
	}
}

// adoptTimeout bounds the read of the stored login after a refused token.
const adoptTimeout = 5 * time.Second
