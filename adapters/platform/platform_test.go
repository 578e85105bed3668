package platform_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/core"
)

// section is a platform's section for these tests.
type section struct {
	Token string `toml:"token"`
}

func (s section) Validate(func(key, problem string)) {}
func (s section) Enabled() bool                      { return s.Token != "" }
func (s section) Allowed() []string                  { return nil }

// other is a section of another platform.
type other struct{ section }

// adapter is the least core.Adapter, named by its platform.
type adapter struct {
	core.Adapter
	token string
}

func (a adapter) Name() core.AdapterName { return "probe" }

var everyone = core.AuthorizerFunc(func(core.Origin, core.Actor) bool { return true })

var perSecond = []core.Limit{{Scope: core.ScopeAccount, Rate: core.Rate{N: 1, Per: time.Second}}}

func probe() platform.Platform {
	return platform.Of(platform.Def[section]{Name: "probe",
		Default: func() section { return section{Token: "default"} },
		New: func(_ context.Context, s section, d platform.Deps) (core.Adapter, error) {
			return adapter{token: s.Token}, nil
		},
		Limits: func(s section) []core.Limit { return perSecond }})
}

// TestOf: a Platform decodes into the section it makes and builds from
// it; its limits are those of the section.
func TestOf(t *testing.T) {
	p := probe()
	s := p.Section()
	got, ok := s.(*section)
	if !ok || got.Token != "default" {
		t.Fatalf("Section() = %#v, want a *section with its defaults", s)
	}
	got.Token = "set" // as the configuration loader decodes into it
	a, err := p.New(context.Background(), s, platform.Deps{Authorizer: everyone})
	if err != nil {
		t.Fatal(err)
	}
	if a.(adapter).token != "set" {
		t.Errorf("built from %q, want the decoded section", a.(adapter).token)
	}
	if l := p.Limits(s); !reflect.DeepEqual(l, perSecond) {
		t.Errorf("Limits = %+v", l)
	}
}

// TestOfRefuses: without an authorizer, or with another platform's
// section, nothing is built.
func TestOfRefuses(t *testing.T) {
	p := probe()
	if _, err := p.New(context.Background(), p.Section(), platform.Deps{}); err == nil || !strings.Contains(err.Error(), "no authorizer") {
		t.Errorf("New without an authorizer: %v", err)
	}
	if _, err := p.New(context.Background(), &other{}, platform.Deps{Authorizer: everyone}); err == nil || !strings.Contains(err.Error(), "platform probe: section") {
		t.Errorf("New with another section: %v", err)
	}
	if l := p.Limits(&other{}); l != nil {
		t.Errorf("Limits of another section: %+v", l)
	}
}
