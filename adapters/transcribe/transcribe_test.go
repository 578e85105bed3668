package transcribe

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTranscribe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		f, hdr, err := r.FormFile("file")
		if err != nil || r.FormValue("model") != "whisper-1" {
			http.Error(w, `{"error":{"message":"no file"}}`, http.StatusBadRequest)
			return
		}
		audio, _ := io.ReadAll(f)
		if hdr.Filename != "voice.ogg" || string(audio) != "OggS..." {
			http.Error(w, `{"error":{"message":"wrong file"}}`, http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, `{"text":" hello there "}`)
	}))
	defer srv.Close()
	c := New(srv.URL+"/v1", "k", "")
	got, err := c.Transcribe(context.Background(), "voice.ogg", []byte("OggS..."))
	if err != nil || got != "hello there" {
		t.Fatalf("Transcribe = %q, %v", got, err)
	}
	c.APIKey = "wrong"
	if _, err := c.Transcribe(context.Background(), "voice.ogg", []byte("OggS...")); err == nil || !strings.Contains(err.Error(), "bad request") {
		t.Errorf("error %v, want the server's message", err)
	}
}
