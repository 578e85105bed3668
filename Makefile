# The two commands of the README:
#   make run   — build and run the daemon (go run ./cmd/parley serve)
#   make test  — installs what the tests need, then everything CI checks:
#                formatting, vet, and the race-enabled tests
# On a fresh machine with Go 1.26 and Node.js, `make test` installs the rest:
# Debian's chromium (the web page is tested in a real browser) and
# postgresql (the PostgreSQL store is tested against a real server), the
# official MCP TypeScript SDK (an independent MCP client for the tests),
# Claude Code's command line (the agent parley runs is tested against the
# real one, offline, talking to a fake Messages API), two ACP agents
# (OpenCode and Codex's ACP adapter, offline against fake model APIs), and
# builds a Dendrite Matrix homeserver (the Matrix adapter is tested against
# a real one); the last four into caches outside the repository.

GO ?= go
FUZZTIME ?= 30s
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TSCLIENT := mcp/testdata/tsclient
# Dendrite, built once from its Go module into a cache shared by worktrees
# and runs; DENDRITE_DIR overrides where. It is not a dependency of parley's
# go.mod: it is built in a throwaway module of its own.
DENDRITE_VERSION := v0.13.8
DENDRITE_DIR ?= $(HOME)/.cache/parley/dendrite-$(DENDRITE_VERSION)
DENDRITE_BINS := dendrite generate-keys generate-config create-account
# Claude Code, an exact version from npm (its package brings the native
# binary for this machine as an optional dependency), into a cache shared by
# worktrees and runs; CLAUDE_CODE_DIR overrides where. The tests find it
# through PARLEY_CLAUDE_CODE_DIR (claudetest.ClaudeCodeVersion is the same).
CLAUDE_CODE_VERSION := 2.1.328
CLAUDE_CODE_DIR ?= $(HOME)/.cache/parley/claude-code-$(CLAUDE_CODE_VERSION)
# Two Agent Client Protocol agents, exact versions from npm, the same way:
# OpenCode (opencode acp) and Codex behind Zed's ACP adapter (codex-acp).
# The tests find them through PARLEY_OPENCODE_DIR and PARLEY_CODEX_ACP_DIR
# (agenttest.OpenCodeVersion and agenttest.CodexACPVersion are the same).
OPENCODE_VERSION := 1.18.33
OPENCODE_DIR ?= $(HOME)/.cache/parley/opencode-$(OPENCODE_VERSION)
CODEX_ACP_VERSION := 0.16.0
CODEX_ACP_DIR ?= $(HOME)/.cache/parley/codex-acp-$(CODEX_ACP_VERSION)

.PHONY: run test test-deps dendrite claude-code opencode codex-acp vet fmt-check bench fuzz

run:
	$(GO) run ./cmd/parley serve $(ARGS)

# -parallel 8: the end-to-end tests (cmd/parley/internal/e2e) spend most
# of their time waiting on real servers (Dendrite, Claude Code, Chromium,
# PostgreSQL), not on the CPU, so eight at a time overlap well even on two
# cores (the default is GOMAXPROCS), and the few that take a minute or more
# start early. The Telegram and Slack stories run on a fake clock
# (testing/synctest, over an in-memory network), where load moves no call
# into another rate window. -p 3: for the same reason three packages at a
# time keep two cores busy where two leave them waiting (3 min 3 s to
# 3 min 34 s here, against 4 min 12 s); each package's Dendrite proves it is
# the one its tests started, so packages that start homeservers at once do
# not meet. -vet=off: the vet target has just run every analyzer on every
# package. PARLEY_TEST_DEPS=required: test-deps has installed everything,
# so a test that finds a dependency missing fails instead of skipping, as on
# CI (a wrong path to one would otherwise pass here unnoticed).
test: test-deps fmt-check vet
	PARLEY_TEST_DEPS=required PARLEY_SCREENSHOT_DIR=$(CURDIR)/.ci/artifacts PARLEY_DENDRITE_DIR=$(DENDRITE_DIR) PARLEY_CLAUDE_CODE_DIR=$(CLAUDE_CODE_DIR) \
		PARLEY_OPENCODE_DIR=$(OPENCODE_DIR) PARLEY_CODEX_ACP_DIR=$(CODEX_ACP_DIR) \
		$(GO) test -race -count=1 -p 3 -parallel 8 -vet=off -timeout 30m ./...

test-deps: dendrite claude-code opencode codex-acp
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing chromium for the browser tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		echo "installing PostgreSQL for the store tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq postgresql >/dev/null; }
	@if [ -f $(TSCLIENT)/package-lock.json ] && [ ! -d $(TSCLIENT)/node_modules ]; then \
		echo "installing the MCP TypeScript SDK for the client tests"; \
		npm ci --prefix $(TSCLIENT) --no-audit --no-fund --loglevel=error; fi

# Builds only when a binary is missing; the build (cgo, for SQLite) takes a
# few minutes and happens in a temporary module so that parley's go.mod stays
# free of Dendrite's dependencies.
dendrite:
	@missing=; for b in $(DENDRITE_BINS); do [ -x "$(DENDRITE_DIR)/$$b" ] || missing=1; done; \
	if [ -n "$$missing" ]; then \
		echo "building Dendrite $(DENDRITE_VERSION) into $(DENDRITE_DIR)"; \
		tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cd "$$tmp" && \
		$(GO) mod init parley-dendrite-build 2>/dev/null && \
		{ $(GO) get $(foreach b,$(DENDRITE_BINS),github.com/matrix-org/dendrite/cmd/$(b)@$(DENDRITE_VERSION)) \
			2>"$$tmp/get.log" || { cat "$$tmp/get.log"; exit 1; }; } && \
		mkdir -p "$(DENDRITE_DIR)" && \
		CGO_ENABLED=1 $(GO) build -trimpath -o "$(DENDRITE_DIR)/" \
			$(addprefix github.com/matrix-org/dendrite/cmd/,$(DENDRITE_BINS)) || exit 1; \
	fi

# Installs only when the installed command does not run; npm's warning that
# the package wants Node.js 22 is harmless (the command is a native binary).
claude-code:
	@$(call npm-install,Claude Code $(CLAUDE_CODE_VERSION),$(CLAUDE_CODE_DIR),@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION),claude --version)

# The ACP agents, the same way: each package brings its native binary for
# this machine as an optional dependency. codex-acp has no --version; its
# --help runs the native binary as well.
opencode:
	@$(call npm-install,OpenCode $(OPENCODE_VERSION),$(OPENCODE_DIR),opencode-ai@$(OPENCODE_VERSION),opencode --version)

codex-acp:
	@$(call npm-install,codex-acp $(CODEX_ACP_VERSION),$(CODEX_ACP_DIR),@zed-industries/codex-acp@$(CODEX_ACP_VERSION),codex-acp --help)

# npm-install installs npm package $(3) at its exact version into prefix
# $(2) unless the command $(4) (in $(2)/node_modules/.bin) already runs;
# $(1) names it for people.
define npm-install
"$(2)/node_modules/.bin/"$(4) >/dev/null 2>&1 || { \
	echo "installing $(1) into $(2)"; \
	mkdir -p "$(2)" && \
	npm install --prefix "$(2)" --save-exact --no-audit --no-fund --loglevel=error \
		$(3) >/dev/null 2>"$(2)/npm.log" || \
		{ cat "$(2)/npm.log"; exit 1; }; \
	rm -f "$(2)/npm.log"; \
	"$(2)/node_modules/.bin/"$(4) >/dev/null || exit 1; \
}
endef

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Benchmarks quoted in the closing notes.
bench:
	$(GO) test -run XXX -bench . -benchtime 3s ./store/bolt/ ./cmd/parley/internal/daemon/
	$(GO) test -run XXX -bench . -benchtime 100x ./mcp/

# Each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
fuzz:
	$(GO) test -run XXX -fuzz FuzzParse -fuzztime $(FUZZTIME) ./adapters/chatcmd/
	$(GO) test -run XXX -fuzz FuzzSafe -fuzztime $(FUZZTIME) ./adapters/filename/
	$(GO) test -run XXX -fuzz FuzzSplit -fuzztime $(FUZZTIME) ./core/delivery/
	$(GO) test -run XXX -fuzz FuzzTail -fuzztime $(FUZZTIME) ./core/delivery/
	$(GO) test -run XXX -fuzz FuzzReduce -fuzztime $(FUZZTIME) ./core/uistate/
	$(GO) test -run XXX -fuzz FuzzTelegramHTML -fuzztime $(FUZZTIME) ./adapters/markdown/
	$(GO) test -run XXX -fuzz FuzzPlain -fuzztime $(FUZZTIME) ./adapters/markdown/
	$(GO) test -run XXX -fuzz FuzzSlack -fuzztime $(FUZZTIME) ./adapters/markdown/
	$(GO) test -run XXX -fuzz FuzzMatrixHTML -fuzztime $(FUZZTIME) ./adapters/markdown/
	$(GO) test -run XXX -fuzz FuzzRender -fuzztime $(FUZZTIME) ./adapters/slack/
	$(GO) test -run XXX -fuzz FuzzFromSlack -fuzztime $(FUZZTIME) ./adapters/slack/
	$(GO) test -run XXX -fuzz FuzzCheckJSONText -fuzztime $(FUZZTIME) ./core/
	$(GO) test -run XXX -fuzz FuzzToolArguments -fuzztime $(FUZZTIME) ./mcp/
	$(GO) test -run XXX -fuzz FuzzAPIBodies -fuzztime $(FUZZTIME) ./adapters/web/
	$(GO) test -run XXX -fuzz FuzzParseHTML -fuzztime $(FUZZTIME) ./adapters/telegram/telegramtest/
