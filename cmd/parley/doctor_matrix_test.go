package main

import (
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
)

// TestDoctorMatrixFindings: against a real Dendrite, doctor checks the
// login and, in the rooms the bot is in, notes where its power is too low
// to rename the room or remove people's messages, without failing.
func TestDoctorMatrixFindings(t *testing.T) {
	t.Parallel()
	hs := matrixtest.Dendrite(t)
	bot := hs.Register(t, "parley")
	ann := hs.Register(t, "ann")
	annSide := matrixtest.NewPerson(t, hs.URL, ann)
	botSide := matrixtest.NewPerson(t, hs.URL, bot)
	room := annSide.CreateRoom(t, "Plans", bot.ID)
	botSide.Join(t, room)

	env := []string{"PARLEY_MATRIX_HOMESERVER=" + hs.URL, "PARLEY_MATRIX_USER_ID=" + string(bot.ID),
		"PARLEY_MATRIX_ALLOWED_USERS=" + string(ann.ID)}
	code, fs := runDoctor(t, append(env, "PARLEY_MATRIX_ACCESS_TOKEN="+bot.AccessToken)...)
	if code != exitOK {
		t.Fatalf("exit %d: %+v", code, fs)
	}
	var details []string
	for _, f := range only(fs, "matrix") {
		if !f.OK {
			t.Errorf("failed: %+v", f)
		}
		details = append(details, f.Detail)
	}
	all := strings.Join(details, "\n")
	for _, want := range []string{"checks of its configuration passed",
		"too low to show the status in the room's name: " + string(room) + " (needs 50)",
		"may not remove people's messages", "Roles & Permissions"} {
		if !strings.Contains(all, want) {
			t.Errorf("matrix findings do not say %q:\n%s", want, all)
		}
	}

	code, fs = runDoctor(t, append(env, "PARLEY_MATRIX_ACCESS_TOKEN=syt_wrong")...)
	f := wantFinding(t, fs, "matrix", false, "does not know the access token", "PARLEY_MATRIX_ACCESS_TOKEN")
	if code != exitFailed || strings.Contains(f.Problem, "syt_wrong") {
		t.Errorf("wrong token: exit %d, %+v", code, f)
	}
}
