// Package transcribe turns voice notes into text through an OpenAI-compatible
// POST /v1/audio/transcriptions endpoint (hosted Whisper, or a local server
// that speaks the same API). Adapters call it for voice messages; it knows
// nothing about platforms.
package transcribe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// Client calls one transcription endpoint.
type Client struct {
	// URL is the API base, e.g. http://127.0.0.1:8000/v1; the client posts
	// to URL + "/audio/transcriptions".
	URL    string
	APIKey string
	Model  string
	HTTP   *http.Client
}

// New returns a client with a bounded HTTP timeout.
func New(url, apiKey, model string) *Client {
	if model == "" {
		model = "whisper-1"
	}
	return &Client{URL: strings.TrimSuffix(url, "/"), APIKey: apiKey, Model: model, HTTP: &http.Client{Timeout: 2 * time.Minute}}
}

// Transcribe sends audio (named name, which gives the server its format) and
// returns the text.
func (c *Client) Transcribe(ctx context.Context, name string, audio []byte) (string, error) {
	var body bytes.Buffer
	form := multipart.NewWriter(&body)
	_ = form.WriteField("model", c.Model)
	_ = form.WriteField("response_format", "json")
	part, err := form.CreateFormFile("file", name)
	if err != nil {
		return "", err
	}
	if _, err := part.Write(audio); err != nil {
		return "", err
	}
	if err := form.Close(); err != nil {
		return "", err
	}
	url := c.URL
	if !strings.HasSuffix(url, "/audio/transcriptions") {
		url += "/audio/transcriptions"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	req.Header.Set("Content-Type", form.FormDataContentType())
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		if e.Error.Message == "" {
			e.Error.Message = strings.TrimSpace(string(data))
		}
		return "", fmt.Errorf("transcribe: %s: %s", resp.Status, e.Error.Message)
	}
	var out struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return "", fmt.Errorf("transcribe: unreadable answer: %w", err)
	}
	if strings.TrimSpace(out.Text) == "" {
		return "", errors.New("transcribe: no speech recognised")
	}
	return strings.TrimSpace(out.Text), nil
}
