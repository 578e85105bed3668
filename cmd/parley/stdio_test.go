package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestChannelFlags: --title belongs to a channel that creates its session.
func TestChannelFlags(t *testing.T) {
	for _, args := range [][]string{{"mcp", "--title", "x"}, {"mcp", "--channel", "--session", "S", "--title", "x"}} {
		var stderr bytes.Buffer
		if code := Run(context.Background(), args, nil, strings.NewReader(""), io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--title") {
			t.Errorf("%v: exit %d, %q", args, code, stderr.String())
		}
	}
}
