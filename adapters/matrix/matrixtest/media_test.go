package matrixtest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
)

// WithoutAuthenticatedMedia makes the proxy a homeserver from before
// Matrix 1.11: authenticated media (/_matrix/client/v1/media) is an
// unknown endpoint, 404 M_UNRECOGNIZED, while the unauthenticated
// /_matrix/media/v3 still serves the file.
func TestProxyWithoutAuthenticatedMedia(t *testing.T) {
	hs := Dendrite(t)
	px := NewProxy(t, hs.URL)
	alice := hs.Register(t, "alice")
	cli := alice.Client(t, px.URL)
	data := []byte("old server\n")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	up, err := cli.UploadBytesWithName(ctx, data, "text/plain", "old.txt")
	if err != nil {
		t.Fatal(err)
	}
	uri := up.ContentURI
	if got := download(t, px.URL, alice, uri); !bytes.Equal(got, data) {
		t.Fatalf("before: downloaded %q, want %q", got, data)
	}

	px.WithoutAuthenticatedMedia()
	get := func(path string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, px.URL+path+uri.Homeserver+"/"+uri.FileID, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+alice.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	status, body := get("/_matrix/client/v1/media/download/")
	if status != http.StatusNotFound || !bytes.Contains(body, []byte(`"errcode":"M_UNRECOGNIZED"`)) {
		t.Errorf("authenticated download: %d %s, want 404 M_UNRECOGNIZED", status, body)
	}
	if status, body := get("/_matrix/media/v3/download/"); status != http.StatusOK || !bytes.Equal(body, data) {
		t.Errorf("unauthenticated download: %d %q, want 200 with the file", status, body)
	}
	// Other requests pass.
	if _, err := cli.Whoami(ctx); err != nil {
		t.Errorf("whoami through the proxy: %v", err)
	}
}
