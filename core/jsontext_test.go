package core_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/parley-chat/parley/core"
)

func TestCheckJSONText(t *testing.T) {
	tests := []struct {
		name string
		in   string
		bad  bool
	}{
		{"plain", `{"text":"hello"}`, false},
		{"escapes", `{"text":"a\"b\\c\n\t\/"}`, false},
		{"bmp escape", `{"text":"\u00e9\u4e2d"}`, false},
		{"pair", `{"text":"\ud83d\ude00"}`, false},
		{"pair upper case", `{"text":"\uD83D\uDE00"}`, false},
		{"literal emoji", `{"text":"😀 é"}`, false},
		{"replacement char is text", `{"text":"\ufffd �"}`, false},
		{"escaped backslash before u", `{"text":"\\ud800"}`, false},
		{"surrogate-looking key outside strings", `[1, 2]`, false},
		{"invalid byte", "{\"text\":\"a\xffb\"}", true},
		{"truncated sequence", "{\"text\":\"\xe2\x82\"}", true},
		{"encoded surrogate", "{\"text\":\"\xed\xa0\x80\"}", true},
		{"lone high", `{"text":"\ud800"}`, true},
		{"lone high then text", `{"text":"\ud800abcdef"}`, true},
		{"lone low", `{"text":"\udc00"}`, true},
		{"high then high", `{"text":"\ud800\ud800"}`, true},
		{"high at end", `{"text":"x\ud83d"}`, true},
		{"in a key", `{"\udfff":1}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := core.CheckJSONText([]byte(tt.in))
			if (err != nil) != tt.bad {
				t.Fatalf("CheckJSONText(%q) = %v, want bad=%v", tt.in, err, tt.bad)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, core.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if msg, ok := core.UserMessage(err); !ok || msg == "" {
				t.Errorf("error %v has no message for people", err)
			}
		})
	}
}

// FuzzCheckJSONText holds CheckJSONText to a strict JSON decoder: on any
// document the standard library accepts, the text is refused exactly when
// RFC 7493's rules (UTF-8, escapes that decode to Unicode) refuse it.
func FuzzCheckJSONText(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", `["\\u", "\u0041"]`, `"\\\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		strict := jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true))
		if err := core.CheckJSONText(b); (err == nil) != strict {
			t.Fatalf("CheckJSONText(%q) = %v; strict decoder valid = %v", b, err, strict)
		}
	})
}
