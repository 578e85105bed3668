package serve

import (
	"context"
	"fmt"
	"net/http"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/adapters/transcribe"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
)

// Checker is an adapter that can verify its configuration against its
// platform (the token works, the bot has its rights): doctor runs it, and
// the daemon, as the adapter's start.
type Checker interface {
	Check(ctx context.Context) error
}

// SectionOf returns a platform's section of c: the one c holds under the
// platform's name, or, for a platform c has no section for (a test's, or
// any in a Config made by config.Default), the platform's defaults. Nil
// for a platform this build lacks.
func SectionOf(c *config.Config, p platform.Platform) platform.Section {
	if p.Section == nil {
		return nil
	}
	if s, ok := c.PlatformSection(string(p.Name)); ok {
		return s
	}
	return p.Section()
}

// BuildAdapters builds the adapter of every platform of the table that
// the configuration enables, in the table's order; with check (doctor), it
// also checks each against its platform and returns the first refusal.
// serve does not: what its configuration sets wrongly within a section (a
// missing token, a webhook URL without a path) stops it here, but a
// platform that cannot be reached or refuses the token only takes itself
// down, as the daemon runs each adapter's Check as its start, retried
// while the rest serves (daemon's supervise.go).
func (m *Main) BuildAdapters(ctx context.Context, dd daemon.Deps, check bool) ([]core.Adapter, error) {
	c := m.Config
	var tr platform.Transcriber
	if c.Transcription.Enabled() {
		tr = transcribe.New(c.Transcription.APIURL, c.Transcription.APIKey, c.Transcription.Model)
	}
	var adapters []core.Adapter
	for _, p := range m.Platforms {
		s := SectionOf(&c, p)
		if s == nil || !s.Enabled() {
			continue
		}
		a, err := p.New(ctx, s, platform.Deps{
			Store: dd.Store, Leases: dd.Leases, Bus: dd.Bus, Handler: dd.Handler, Authorizer: dd.Authorizer, Pairer: dd.Pairer, Pacer: dd.Pacer, Methods: dd.Methods,
			Logger: m.Logger.With("adapter", string(p.Name)), Files: dd.Files, Transcriber: tr,
			Route: func(path string, h http.Handler) {
				m.routes = append(m.routes, route{path: path, handler: h, webhook: true})
			},
			Dial: m.Dial,
		})
		if err != nil {
			return nil, err
		}
		// The allow-list is keyed by the row's name and commands carry the
		// adapter's: they must agree, or nobody would be admitted.
		if a.Name() != p.Name {
			return nil, fmt.Errorf("platform %s built an adapter named %s", p.Name, a.Name())
		}
		if ch, ok := a.(Checker); ok && check {
			if err := ch.Check(ctx); err != nil {
				return nil, err
			}
		}
		adapters = append(adapters, a)
	}
	return adapters, nil
}

// AllowLists maps the origin of each enabled platform with an allow-list
// to its allowed users.
func (m *Main) AllowLists() map[core.Origin][]string {
	allow := map[core.Origin][]string{}
	for _, p := range m.Platforms {
		if s := SectionOf(&m.Config, p); s != nil && s.Enabled() {
			if ids := s.Allowed(); ids != nil {
				allow[core.Origin(p.Name)] = ids
			}
		}
	}
	return allow
}
