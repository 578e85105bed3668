// Package platforms is the table of chat platforms this build of parley
// runs: the one place that lists them, one line each (see package
// adapters/platform, "Adding a platform"). The command reads its
// configuration with it and hands it to the wiring (serve.Main.Platforms);
// the end-to-end tests run the same table.
package platforms

import (
	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

// All is the table. A platform's name is its adapter's name, its origin,
// its configuration section ([telegram]) and its variables' prefix
// (PARLEY_TELEGRAM_*).
//
// A row with only a name is a platform parley knows of that this build
// lacks: configuring it stops parley with an error that names it.
//
// The web adapter is not a row: it is not configured, and always runs.
// Test doubles are not rows either: tests pass their own table as
// serve.Main.Platforms.
func All() []platform.Platform {
	return []platform.Platform{
		telegram.Platform,
		slack.Platform,
		matrix.Platform,
		{Name: "discord"},
	}
}

// Known tells the configuration loader which platforms a table has and
// which it lacks.
func Known(table []platform.Platform) config.Platforms {
	var p config.Platforms
	for _, row := range table {
		if row.Section == nil {
			p.Absent = append(p.Absent, string(row.Name))
		} else {
			p.Present = append(p.Present, row)
		}
	}
	return p
}
