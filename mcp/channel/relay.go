package channel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/parley-chat/parley/core"
)

// ReplyTool is the name of the channel's reply tool.
const ReplyTool = "reply"

// relay is what Claude Code asks of the channel: the reply tool, and the
// permission prompts it relays to the session's people.
type relay struct {
	d        *daemon
	io       *stdio
	log      *slog.Logger
	timeout  time.Duration // of an approval
	patience time.Duration // of a reply, for a daemon that is down
	nonce    string        // makes call ids unique to this run
	ctx      context.Context
	wg       sync.WaitGroup
}

func (r *relay) replyTool() (mcp.Tool, server.ToolHandlerFunc) {
	t := mcp.NewTool(ReplyTool,
		mcp.WithDescription("Send a message to the people of this parley session, on every platform they use (Telegram, Slack, Matrix, the web page). "+
			"They read only what you send with this tool, never your terminal output. Each call is one message and notifies them."),
		mcp.WithString("text", mcp.Required(), mcp.Description("The message, in Markdown.")),
		mcp.WithArray("files", mcp.WithStringItems(), mcp.Description("Absolute paths of files to send with the message (the daemon sends only from its [mcp] send_dirs).")),
		mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(true),
	)
	return t, r.reply
}

// reply posts the text as the assistant's message (chat.assistant.post),
// then ends the turn (loop.yield_turn) so the session waits for the
// people again. The key makes the post idempotent across retries.
func (r *relay) reply(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text := req.GetString("text", "")
	if strings.TrimSpace(text) == "" {
		return mcp.NewToolResultError("text is empty"), nil
	}
	if r.d.bound() == "" {
		return mcp.NewToolResultError("the channel has no parley session yet: the daemon has not answered (see the channel's log)"), nil
	}
	args := map[string]any{"content": text, "idempotency_key": "channel-" + newNonce()}
	if files := req.GetStringSlice("files", nil); len(files) > 0 {
		args["files"] = files
	}
	ctx, cancel := context.WithTimeout(ctx, r.patience)
	defer cancel()
	var posted struct {
		ID core.MessageID `json:"id"`
	}
	if err := retry(ctx, func() error { return r.d.call(ctx, "chat.assistant.post", args, &posted) }); err != nil {
		return r.toolFailure("posting the reply", err), nil
	}
	if err := retry(ctx, func() error { return r.d.call(ctx, "loop.yield_turn", map[string]any{}, nil) }); err != nil {
		// The reply is posted; only the session's status lags.
		r.log.Warn("ending the turn after a reply failed", "err", err)
	}
	return mcp.NewToolResultText(fmt.Sprintf("sent (message %s)", posted.ID)), nil
}

func (r *relay) toolFailure(doing string, err error) *mcp.CallToolResult {
	var te toolError
	if errors.As(err, &te) {
		return mcp.NewToolResultError(string(te))
	}
	return mcp.NewToolResultError(fmt.Sprintf("%s failed: %s", doing, r.d.explain(err)))
}

// permissionRequest is the params of MethodPermissionRequest.
type permissionRequest struct {
	RequestID    string `json:"request_id"`
	ToolName     string `json:"tool_name"`
	Description  string `json:"description"`
	InputPreview string `json:"input_preview"`
}

// permissionVerdict is the params of MethodPermission.
type permissionVerdict struct {
	RequestID string `json:"request_id"`
	Behavior  string `json:"behavior"` // allow | deny
}

// onPermissionRequest asks the people (ui.request_approval) without
// blocking the read loop; the verdict follows when they decided.
func (r *relay) onPermissionRequest(_ context.Context, n mcp.JSONRPCNotification) {
	b, err := json.Marshal(n.Params.AdditionalFields)
	if err != nil {
		r.log.Warn("unreadable permission request", "err", err)
		return
	}
	var pr permissionRequest
	if err := json.Unmarshal(b, &pr); err != nil || pr.RequestID == "" {
		r.log.Warn("permission request without a request_id; Claude Code keeps asking in the terminal", "params", string(b))
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.decide(r.ctx, pr)
	}()
}

// decide asks the session's people and sends Claude Code the verdict:
// approve → allow; deny (and continue, or abort) → deny; nobody decided in
// time → deny, never allow. Claude Code's verdict has no "abort": its
// terminal dialog stays open too and whichever answer comes first wins.
func (r *relay) decide(ctx context.Context, pr permissionRequest) {
	args := map[string]any{
		// Claude Code's request ids are five letters, drawn per prompt:
		// the run's nonce keeps two runs' calls apart in the session.
		"call_id":   "claude-" + pr.RequestID + "-" + r.nonce,
		"tool":      pr.ToolName,
		"cmd":       readable(pr.InputPreview),
		"reason":    pr.Description,
		"timeout_s": r.timeout.Seconds(),
	}
	var res struct {
		Decision string `json:"decision"`
	}
	// A daemon restart ends the wait: asked again with the same call id, a
	// decision made meanwhile stands, else the question is asked anew.
	err := retry(ctx, func() error { return r.d.call(ctx, "ui.request_approval", args, &res) })
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("relaying a permission prompt failed; answer it in the terminal", "request_id", pr.RequestID, "tool", pr.ToolName, "err", err)
		}
		return
	}
	behavior := "deny"
	if res.Decision == core.DecisionApprove {
		behavior = "allow"
	}
	r.log.Info("permission decided", "request_id", pr.RequestID, "tool", pr.ToolName, "decision", res.Decision, "behavior", behavior)
	if err := r.io.notify(MethodPermission, permissionVerdict{RequestID: pr.RequestID, Behavior: behavior}); err != nil {
		r.log.Error("sending the verdict failed", "request_id", pr.RequestID, "err", err)
	}
}

// readable is what people should read of a call's input preview: the
// command, path, pattern or URL when the preview is whole JSON naming one
// (Bash, Read/Write/Edit, Grep/Glob, WebFetch), else the preview as it is
// (Claude Code cuts it at 200 characters, often mid-JSON).
func readable(preview string) string {
	var in map[string]any
	if json.Unmarshal([]byte(preview), &in) != nil {
		return preview
	}
	for _, k := range []string{"command", "file_path", "path", "pattern", "url"} {
		if v, ok := in[k].(string); ok && v != "" {
			return v
		}
	}
	return preview
}

func newNonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
