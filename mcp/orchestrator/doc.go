// Package orchestrator runs one Claude Code conversation per parley
// session, as an MCP client of parley's own server: it reads people's
// messages and shows what the agent does only through the chat tools, like
// any agent would (no side door into core).
package orchestrator
