package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// CheckJSONText reports whether the JSON document b holds only text that
// is valid Unicode: no byte sequence that is not UTF-8, and no \uXXXX
// escape of a UTF-16 surrogate that is not half of a pair. encoding/json
// quietly turns both into U+FFFD, so a message would be stored other than
// it was sent; callers that take text from outside (the HTTP API, MCP
// tool arguments) run this on the raw body first and refuse it instead.
//
// It checks only the text; whether b is well-formed JSON is the decoder's
// business. The error wraps ErrInvalid and is a *UserError whose message
// says where the bad text starts.
func CheckJSONText(b []byte) error {
	if !utf8.Valid(b) {
		return badText(invalidUTF8At(b), "a byte sequence that is not UTF-8")
	}
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if i+1 >= len(b) {
				return nil // truncated: the decoder says so
			}
			if b[i+1] != 'u' {
				i++ // \" \\ \n …: the escaped byte is not a quote
				continue
			}
			r, ok := hex4(b, i+2)
			if !ok {
				return nil // malformed escape: the decoder says so
			}
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return badText(i, fmt.Sprintf(`a lone UTF-16 surrogate \u%04x`, r))
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := uint16(0), i+11 < len(b) && b[i+6] == '\\' && b[i+7] == 'u'
				if ok {
					lo, ok = hex4(b, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return badText(i, fmt.Sprintf(`a lone UTF-16 surrogate \u%04x`, r))
				}
				i += 11
			default:
				i += 5
			}
		}
	}
	return nil
}

func badText(at int, what string) error {
	msg := fmt.Sprintf("the text is not valid Unicode: %s at byte %d", what, at)
	return &UserError{Msg: msg, Err: fmt.Errorf("%w: %s", ErrInvalid, msg)}
}

// invalidUTF8At returns the offset of the first byte of b that does not
// start a valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// hex4 reads the four hexadecimal digits at b[i:i+4].
func hex4(b []byte, i int) (uint16, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// JSONProblem says what is wrong with a JSON document that encoding/json
// refused, in the words of the JSON rather than of the Go types it was to
// be decoded into: `field "text" must be a JSON string, not number`. The
// HTTP API and the MCP tools answer with it.
func JSONProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(syntax.Error(), "json: "), syntax.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("field %q must be a JSON %s, not %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("the document must be a JSON %s, not %s", jsonKind(typ.Type), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "it ends before the JSON does"
	}
	// encoding/json's only other decoding error is the unknown field of a
	// decoder that disallows them: `json: unknown field "x"`.
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names a Go type as the JSON it is decoded from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "object"
}
