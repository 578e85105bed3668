package telegram

import "testing"

func TestCapitalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"this session is closed", "This session is closed"},
		{"élan", "Élan"},
		{"/close takes no argument", "/close takes no argument"},
		{"", ""},
		{"\xff bad", "\xff bad"},
	}
	for _, tt := range tests {
		if got := capitalize(tt.in); got != tt.want {
			t.Errorf("capitalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
