package claudecode

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// showArg names the argument people should read of Claude Code's tools.
var showArg = map[string]string{
	"Bash": "command", "Read": "file_path", "Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
	"NotebookEdit": "notebook_path", "Grep": "pattern", "Glob": "pattern", "WebFetch": "url", "WebSearch": "query",
}

// Bounds of what Show returns.
const (
	// maxShow bounds the argument shown of a known tool (core's bound on
	// a tool call's command, core.MaxToolCmd).
	maxShow = 4 << 10
	// maxShowJSON bounds the compact JSON shown for other tools.
	maxShowJSON = 200
)

// Show is what people should read of a call of tool with input
// (agent.ToolUse.Show): Bash's command, the file of Read, Write and Edit,
// the pattern of Grep and Glob, WebFetch's URL, WebSearch's query; else
// the input as compact JSON of at most 200 bytes.
func Show(tool string, input json.RawMessage) string {
	var args map[string]any
	_ = json.Unmarshal(input, &args)
	if k, ok := showArg[tool]; ok {
		if s, ok := args[k].(string); ok && s != "" {
			return truncate(s, maxShow)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, input); err != nil || b.Len() == 0 {
		return ""
	}
	return truncate(b.String(), maxShowJSON)
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
