package matrix

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// maxDiagnosedRooms bounds how many joined rooms Diagnose reads, one
// request each.
const maxDiagnosedRooms = 200

// Diagnose reports, for `parley doctor`, what the bot may not do in the
// rooms it is in: where its power level is too low to show the status in
// the room's name, or to remove people's messages for the cleanup rules
// (the rooms people created and invited it to). Neither stops parley —
// it skips what it may not do — so these are notes, each saying how to
// grant the power, not failures. Call it after Check.
func (a *Adapter) Diagnose(ctx context.Context) ([]string, error) {
	joined, err := a.cli.JoinedRooms(ctx)
	if err != nil {
		return nil, fmt.Errorf("matrix: list the bot's rooms: %w", err)
	}
	rooms := joined.JoinedRooms
	var notes []string
	if len(rooms) > maxDiagnosedRooms {
		notes = append(notes, fmt.Sprintf("the bot is in %d rooms; the first %d were checked", len(rooms), maxDiagnosedRooms))
		rooms = rooms[:maxDiagnosedRooms]
	}
	var noName, noRedact []string
	for _, room := range rooms {
		p, err := a.powers(ctx, room)
		if err != nil {
			notes = append(notes, fmt.Sprintf("the power levels of %s could not be read: %v", room, err))
			continue
		}
		if !p.name {
			noName = append(noName, fmt.Sprintf("%s (needs %d)", room, p.nameLevel))
		}
		if !p.redact {
			noRedact = append(noRedact, string(room))
		}
	}
	slices.Sort(noName)
	slices.Sort(noRedact)
	if len(noName) > 0 {
		notes = append(notes, fmt.Sprintf("in %d room(s) the bot's power level is too low to show the status in the room's name: %s; "+
			"raise it in each room's settings → Roles & Permissions", len(noName), strings.Join(noName, ", ")))
	}
	if len(noRedact) > 0 {
		notes = append(notes, fmt.Sprintf("in %d room(s) the bot may not remove people's messages, so the cleanup rules skip them there: %s; "+
			"give it the room's redact level (Moderator) if you want them removed", len(noRedact), strings.Join(noRedact, ", ")))
	}
	return notes, nil
}
