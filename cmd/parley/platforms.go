package main

import (
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
)

// loadConfig loads the configuration for this build's platforms
// (platforms.All).
func loadConfig(path string, env []string) (config.Config, error) {
	return config.Load(path, env, platforms.Known(platforms.All()))
}
