package config

import (
	"testing"

	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/telegram"
)

// TestSectionFor: a program that builds its configuration in code starts
// from Default, which holds no platform section; SectionFor adds one with
// the platform's defaults the first time and hands back that same section
// afterwards, so keys set through it stay set.
func TestSectionFor(t *testing.T) {
	c := Default()
	if _, ok := c.PlatformSection("telegram"); ok {
		t.Fatal("Default holds a [telegram] section")
	}
	tg := c.SectionFor(telegram.Platform).(*telegram.Config)
	if want := telegram.DefaultConfig(); tg.APIURL != want.APIURL || tg.Mode != want.Mode {
		t.Errorf("added section %+v, want the platform's defaults %+v", *tg, want)
	}
	tg.Token = "123:abc"
	if again := c.SectionFor(telegram.Platform).(*telegram.Config); again != tg || again.Token != "123:abc" {
		t.Errorf("second SectionFor = %p %+v, want the first section %p with its token", again, *again, tg)
	}
	if s, ok := c.PlatformSection("telegram"); !ok || s != tg {
		t.Errorf("PlatformSection(telegram) = %v, %v; want the section SectionFor added", s, ok)
	}
	if len(c.Platforms) != 1 {
		t.Errorf("%d sections after two SectionFor of one platform, want 1", len(c.Platforms))
	}

	// A copy shares the sections it was made with (the type's doc), but a
	// section added to the copy or to the original afterwards is that
	// Config's alone, even when their lists share spare capacity.
	c.Platforms = append(make([]PlatformSection, 0, 4), c.Platforms...)
	cp := c
	sl := cp.SectionFor(slack.Platform).(*slack.Config)
	if sl.APIURL != slack.DefaultConfig().APIURL {
		t.Errorf("added [slack] %+v, want its defaults", *sl)
	}
	if _, ok := c.PlatformSection("slack"); ok {
		t.Error("a section added to a copy appeared in the original")
	}
	orig := c.SectionFor(slack.Platform).(*slack.Config)
	orig.BotToken = "xoxb-original"
	if s, _ := cp.PlatformSection("slack"); s != sl || sl.BotToken != "" {
		t.Errorf("adding [slack] to the original changed the copy's: %+v", s)
	}
}
