package core_test

import (
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		status core.Status
		valid  bool
	}{
		{core.StatusIdle, true},
		{core.StatusWorking, true},
		{core.StatusWaiting, true},
		{core.StatusClosed, true},
		// Anything else is no status.
		{"", false},
		{"Idle", false},
		{"open", false},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			if got := tt.status.Valid(); got != tt.valid {
				t.Errorf("Status(%q).Valid() = %v, want %v", tt.status, got, tt.valid)
			}
		})
	}
}

func TestPlaceIsZero(t *testing.T) {
	tests := []struct {
		name  string
		place core.Place
		zero  bool
	}{
		{"unset", core.Place{}, true},
		{"chat only (a Matrix room)", core.Place{Chat: "!room:example.org"}, false},
		{"chat and thread (a forum topic)", core.Place{Chat: "-1001", Thread: "42"}, false},
		{"thread only", core.Place{Thread: "42"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.place.IsZero(); got != tt.zero {
				t.Errorf("%+v.IsZero() = %v, want %v", tt.place, got, tt.zero)
			}
		})
	}
}

func TestMessageRefIsZero(t *testing.T) {
	place := core.Place{Chat: "C01", Thread: "1700000000.000100"}
	tests := []struct {
		name string
		ref  core.MessageRef
		zero bool
	}{
		{"unset", core.MessageRef{}, true},
		// Without a message id it points at no message, wherever it is.
		{"place but no message", core.MessageRef{Adapter: "slack", Place: place}, true},
		{"adapter but no message", core.MessageRef{Adapter: "telegram"}, true},
		{"a message", core.MessageRef{Adapter: "slack", Place: place, ID: "1700000000.000200"}, false},
		{"message id alone", core.MessageRef{ID: "$event"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ref.IsZero(); got != tt.zero {
				t.Errorf("%+v.IsZero() = %v, want %v", tt.ref, got, tt.zero)
			}
		})
	}
}
