package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/parley-chat/parley/core"
)

type ctxKey struct{}

func TestHandlerFunc(t *testing.T) {
	ctx := context.WithValue(t.Context(), ctxKey{}, "request")
	cmd := core.Command{Kind: core.SendMessage, Session: "01ARZ3NDEK0000000000000000", Origin: "telegram", Text: "hi"}
	tests := []struct {
		name    string
		result  core.Result
		err     error
		wantErr error
	}{
		{"stored", core.Result{Session: cmd.Session, Message: core.Message{ID: "m1", Content: "hi"}}, nil, nil},
		{"duplicate", core.Result{Session: cmd.Session, Duplicate: true}, nil, nil},
		{"refused", core.Result{}, core.ErrSessionClosed, core.ErrSessionClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			var h core.Handler = core.HandlerFunc(func(gotCtx context.Context, got core.Command) (core.Result, error) {
				calls++
				if gotCtx.Value(ctxKey{}) != "request" {
					t.Error("the function did not get the caller's context")
				}
				if got.Kind != cmd.Kind || got.Session != cmd.Session || got.Text != cmd.Text {
					t.Errorf("the function got %+v, want %+v", got, cmd)
				}
				return tt.result, tt.err
			})
			res, err := h.Handle(ctx, cmd)
			if calls != 1 {
				t.Fatalf("the function ran %d times, want once", calls)
			}
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Handle error = %v, want %v", err, tt.wantErr)
			}
			if res.Session != tt.result.Session || res.Duplicate != tt.result.Duplicate || res.Message.ID != tt.result.Message.ID {
				t.Errorf("Handle = %+v, want %+v", res, tt.result)
			}
		})
	}
}
