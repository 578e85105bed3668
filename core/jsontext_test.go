package core_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
			if ue := (*core.UserError)(nil); !errors.As(err, &ue) || ue.Msg == "" {
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

// TestCheckJSONTextLeavesSyntaxToTheDecoder: a document that is not JSON
// at all is the decoder's to refuse; CheckJSONText refuses only bad text.
func TestCheckJSONTextLeavesSyntaxToTheDecoder(t *testing.T) {
	for _, in := range []string{
		`{"text":"abc\`,     // ends inside an escape
		`{"text":"\u12`,     // ends inside \u
		`{"text":"\uzzzz"}`, // not hexadecimal
		``,
	} {
		t.Run(in, func(t *testing.T) {
			if err := core.CheckJSONText([]byte(in)); err != nil {
				t.Errorf("CheckJSONText(%q) = %v, want nil: it is the decoder's to refuse", in, err)
			}
		})
	}
}

func TestCheckJSONTextSaysWhere(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"{\"text\":\"a\xffb\"}", "the text is not valid Unicode: a byte sequence that is not UTF-8 at byte 10"},
		{"\xe2\x82", "the text is not valid Unicode: a byte sequence that is not UTF-8 at byte 0"},
		{`{"text":"\ud800"}`, `the text is not valid Unicode: a lone UTF-16 surrogate \ud800 at byte 9`},
		{`{"text":"ok","b":"\uDC01"}`, `the text is not valid Unicode: a lone UTF-16 surrogate \udc01 at byte 18`},
		{`["\ud83d\ude00","\ud83d"]`, `the text is not valid Unicode: a lone UTF-16 surrogate \ud83d at byte 17`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var ue *core.UserError
			if err := core.CheckJSONText([]byte(tt.in)); !errors.As(err, &ue) || ue.Msg != tt.want {
				t.Errorf("error %v; want a message for people %q", err, tt.want)
			}
		})
	}
}

func TestJSONProblem(t *testing.T) {
	type doc struct {
		Text    string            `json:"text"`
		N       int               `json:"n"`
		Flag    bool              `json:"flag"`
		List    []string          `json:"list"`
		Ratio   *float64          `json:"ratio"`
		Meta    map[string]string `json:"meta"`
		Options struct {
			Limit uint `json:"limit"`
		} `json:"options"`
	}
	unmarshal := func(in string) error {
		var d doc
		return json.Unmarshal([]byte(in), &d)
	}
	decode := func(in string, strict bool) error {
		dec := json.NewDecoder(strings.NewReader(in))
		if strict {
			dec.DisallowUnknownFields()
		}
		var d doc
		return dec.Decode(&d)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"string expected", unmarshal(`{"text":5}`), `field "text" must be a JSON string, not number`},
		{"number expected", unmarshal(`{"n":"5"}`), `field "n" must be a JSON number, not string`},
		{"boolean expected", unmarshal(`{"flag":"yes"}`), `field "flag" must be a JSON boolean, not string`},
		{"array expected", unmarshal(`{"list":"a"}`), `field "list" must be a JSON array, not string`},
		{"pointer field", unmarshal(`{"ratio":"half"}`), `field "ratio" must be a JSON number, not string`},
		{"map expected", unmarshal(`{"meta":[]}`), `field "meta" must be a JSON object, not array`},
		{"struct expected", unmarshal(`{"options":"fast"}`), `field "options" must be a JSON object, not string`},
		{"nested field", unmarshal(`{"options":{"limit":"10"}}`), `field "options.limit" must be a JSON number, not string`},
		{"whole document", unmarshal(`["text"]`), `the document must be a JSON object, not array`},
		{"syntax", unmarshal(`{"text" "a"}`), `invalid character '"' after object key (at byte 9)`},
		{"trailing data", unmarshal(`{"text":"a"} x`), `invalid character 'x' after top-level value (at byte 14)`},
		{"cut short, whole body", unmarshal(`{"text":`), `unexpected end of JSON input (at byte 8)`},
		{"cut short, streamed", decode(`{"text":"a"`, false), `it ends before the JSON does`},
		{"unknown field", decode(`{"txt":"a"}`, true), `unknown field "txt"`},
		{"wrapped", fmt.Errorf("api: decode: %w", unmarshal(`{"n":[]}`)), `field "n" must be a JSON number, not array`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("the document decoded; the case is wrong")
			}
			if got := core.JSONProblem(tt.err); got != tt.want {
				t.Errorf("JSONProblem(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
