package slacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Block Kit's limits, as Slack enforces them.
const (
	maxBlocks         = 50
	maxMarkdownText   = 12000 // all markdown blocks of a message together
	maxSectionText    = 3000
	maxSectionFields  = 10
	maxFieldText      = 2000
	maxHeaderText     = 150
	maxActionElements = 25
	maxContextItems   = 10
	maxButtonText     = 75
	maxButtonValue    = 2000
	maxButtonURL      = 3000
	maxActionID       = 255
	maxBlockID        = 255
)

// knownBlocks are the block types Slack accepts in messages (slack-go's
// list; parley uses section, context, actions, rich_text, header, divider
// and markdown).
var knownBlocks = map[string]bool{
	"actions": true, "context": true, "context_actions": true, "divider": true, "file": true, "header": true,
	"image": true, "input": true, "markdown": true, "rich_text": true, "section": true, "call": true, "video": true,
	"table": true, "data_table": true, "data_visualization": true, "task_card": true, "alert": true, "plan": true,
	"card": true, "carousel": true, "container": true,
}

// block is the part of a block the checks look at.
type block struct {
	Type      string            `json:"type"`
	BlockID   string            `json:"block_id"`
	Text      json.RawMessage   `json:"text"`
	Fields    []textObject      `json:"fields"`
	Elements  []json.RawMessage `json:"elements"`
	Accessory json.RawMessage   `json:"accessory"`
}

type textObject struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type element struct {
	Type     string      `json:"type"`
	ActionID string      `json:"action_id"`
	Text     *textObject `json:"text"`
	Value    string      `json:"value"`
	URL      string      `json:"url"`
	Style    string      `json:"style"`
}

// checkBlocks validates a blocks argument as Slack does and returns it
// compacted; "" (no blocks argument) gives nil. Errors are
// invalid_blocks_format for JSON that is not an array of objects, and
// invalid_blocks with Slack's messages naming the JSON pointer.
func checkBlocks(arg string) (json.RawMessage, *apiError) {
	if arg == "" {
		return nil, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(arg), &raw); err != nil {
		return nil, errCode("invalid_blocks_format")
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(raw) > maxBlocks {
		bad("no more than %d items allowed [json-pointer:/blocks]", maxBlocks)
	}
	ids := map[string]bool{}
	markdown := 0
	for i, r := range raw {
		var b block
		if err := json.Unmarshal(r, &b); err != nil {
			return nil, errCode("invalid_blocks_format")
		}
		at := fmt.Sprintf("/blocks/%d", i)
		if !knownBlocks[b.Type] {
			bad("unsupported type: %s [json-pointer:%s/type]", b.Type, at)
			continue
		}
		if b.BlockID != "" {
			if ids[b.BlockID] {
				bad("duplicate block_id [json-pointer:%s/block_id]", at)
			}
			ids[b.BlockID] = true
			if utf8.RuneCountInString(b.BlockID) > maxBlockID {
				bad("must be less than %d characters [json-pointer:%s/block_id]", maxBlockID+1, at)
			}
		}
		switch b.Type {
		case "markdown":
			var text string
			if json.Unmarshal(b.Text, &text) != nil || text == "" {
				bad("must provide a string [json-pointer:%s/text]", at)
			}
			markdown += utf8.RuneCountInString(text)
		case "section":
			checkSection(b, at, bad)
		case "header":
			t, ok := parseText(b.Text)
			switch {
			case !ok || t.Type != "plain_text":
				bad("must provide an object of type plain_text [json-pointer:%s/text]", at)
			case t.Text == "" || utf8.RuneCountInString(t.Text) > maxHeaderText:
				bad("must be between 1 and %d characters [json-pointer:%s/text/text]", maxHeaderText, at)
			}
		case "actions":
			if len(b.Elements) == 0 || len(b.Elements) > maxActionElements {
				bad("must provide between 1 and %d items [json-pointer:%s/elements]", maxActionElements, at)
			}
			for j, e := range b.Elements {
				checkElement(e, fmt.Sprintf("%s/elements/%d", at, j), bad)
			}
		case "context":
			if len(b.Elements) == 0 || len(b.Elements) > maxContextItems {
				bad("must provide between 1 and %d items [json-pointer:%s/elements]", maxContextItems, at)
			}
		case "rich_text":
			if b.Elements == nil {
				bad("must provide an array [json-pointer:%s/elements]", at)
			}
		}
	}
	if markdown > maxMarkdownText {
		bad("the cumulative length of markdown blocks must be at most %d characters [json-pointer:/blocks]", maxMarkdownText)
	}
	if len(problems) > 0 {
		return nil, &apiError{code: "invalid_blocks", errors: problems}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(arg)); err != nil {
		return nil, errCode("invalid_blocks_format")
	}
	return buf.Bytes(), nil
}

// checkSection checks a section block: text or fields, and its accessory.
func checkSection(b block, at string, bad func(string, ...any)) {
	t, hasText := parseText(b.Text)
	if !hasText && len(b.Fields) == 0 {
		bad("must provide either text or fields [json-pointer:%s]", at)
	}
	if hasText {
		switch {
		case t.Type != "plain_text" && t.Type != "mrkdwn":
			bad("must provide an object of type plain_text or mrkdwn [json-pointer:%s/text]", at)
		case t.Text == "" || utf8.RuneCountInString(t.Text) > maxSectionText:
			bad("must be between 1 and %d characters [json-pointer:%s/text/text]", maxSectionText, at)
		}
	}
	if len(b.Fields) > maxSectionFields {
		bad("no more than %d items allowed [json-pointer:%s/fields]", maxSectionFields, at)
	}
	for j, f := range b.Fields {
		if f.Text == "" || utf8.RuneCountInString(f.Text) > maxFieldText {
			bad("must be between 1 and %d characters [json-pointer:%s/fields/%d/text]", maxFieldText, at, j)
		}
	}
	if len(b.Accessory) > 0 {
		checkElement(b.Accessory, at+"/accessory", bad)
	}
}

// checkElement checks an interactive element: its action_id and, for a
// button, text, value and url.
func checkElement(raw json.RawMessage, at string, bad func(string, ...any)) {
	var e element
	if json.Unmarshal(raw, &e) != nil || e.Type == "" {
		bad("must provide an object with a type [json-pointer:%s]", at)
		return
	}
	if utf8.RuneCountInString(e.ActionID) > maxActionID {
		bad("must be less than %d characters [json-pointer:%s/action_id]", maxActionID+1, at)
	}
	if e.Type != "button" {
		return
	}
	switch {
	case e.Text == nil || e.Text.Type != "plain_text":
		bad("must provide an object of type plain_text [json-pointer:%s/text]", at)
	case e.Text.Text == "" || utf8.RuneCountInString(e.Text.Text) > maxButtonText:
		bad("must be between 1 and %d characters [json-pointer:%s/text/text]", maxButtonText, at)
	}
	if utf8.RuneCountInString(e.Value) > maxButtonValue {
		bad("must be less than %d characters [json-pointer:%s/value]", maxButtonValue+1, at)
	}
	if utf8.RuneCountInString(e.URL) > maxButtonURL {
		bad("must be less than %d characters [json-pointer:%s/url]", maxButtonURL+1, at)
	}
	if e.Style != "" && e.Style != "primary" && e.Style != "danger" {
		bad("must be one of primary, danger [json-pointer:%s/style]", at)
	}
}

// parseText reads a text object; ok is false when there is none.
func parseText(raw json.RawMessage) (textObject, bool) {
	var t textObject
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &t) != nil {
		return t, false
	}
	return t, true
}
