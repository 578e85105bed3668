package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp"
)

// agentsSeen reads the "agents" messages of GET /api/events, as the page
// gets them.
func agentsSeen(t *testing.T, client *http.Client, addr string) <-chan core.AgentStatus {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/events", nil)
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan core.AgentStatus, 100)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<24)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[7:]
			case strings.HasPrefix(line, "data: ") && event == "agents":
				var st core.AgentStatus
				if json.Unmarshal([]byte(line[6:]), &st) == nil {
					out <- st
				}
			case line == "":
				event = ""
			}
		}
	}()
	return out
}

// awaitAgents waits for an agents message that satisfies ok.
func awaitAgents(t *testing.T, ch <-chan core.AgentStatus, what string, ok func(core.AgentStatus) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case st := <-ch:
			if ok(st) {
				return
			}
		case <-deadline:
			t.Fatalf("the page was never told %s", what)
		}
	}
}

// TestTelegramPresence: with no agent listening, Ann's message in a topic
// gets the short notice that it is kept, and the page is told nobody
// listens; once an agent subscribes to the session's inbox the page is
// told so, Ann's next message gets no notice and reaches the agent, and
// the agent's output deletes the notice like any other.
func TestTelegramPresence(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStack(t, false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The stack's agent listens to every session: it stops, and stays
		// connected without listening.
		if err := st.agent.Unsubscribe(ctx, mcpgo.UnsubscribeRequest{Params: mcpgo.UnsubscribeParams{URI: "ui://chat/inbox"}}); err != nil {
			t.Fatal(err)
		}
		page := agentsSeen(t, st.client(), st.m.Addr())
		awaitAgents(t, page, "that nobody listens", func(s core.AgentStatus) bool { return s.Ready && s.All == 0 && len(s.Sessions) == 0 })

		topic := st.newTopic("Lonely")
		st.srv.SendText(st.forum, topic, ann, "is anyone there?")
		var notice telegramtest.Message
		st.await("the no-agent notice", func() bool {
			for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
				if strings.Contains(m.Text, "No agent is connected") {
					notice = m
					return true
				}
			}
			return false
		})
		if !notice.Silent || !strings.Contains(notice.Text, "kept") {
			t.Errorf("the notice %+v should be silent and say the message is kept", notice)
		}
		sessions := st.m.Daemon().Store
		all, err := sessions.Sessions(ctx)
		if err != nil || len(all) != 1 {
			t.Fatalf("sessions %+v, %v", all, err)
		}
		session := all[0].ID
		if state := webStateVia(t, st.client(), st.m.Addr(), string(session)); len(state.State.Items) == 0 {
			t.Fatal("the page's state is empty")
		}

		if err := st.agent.Subscribe(ctx, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: mcp.SessionInboxURI(session)}}); err != nil {
			t.Fatal(err)
		}
		awaitAgents(t, page, "that an agent listens to the session", func(s core.AgentStatus) bool { return s.Listening(session) })

		st.srv.SendText(st.forum, topic, ann, "hello?")
		r := st.heard("")
		if last := r.Messages[len(r.Messages)-1]; last.Content != "hello?" {
			t.Fatalf("the agent read %+v", r.Messages)
		}
		if err := st.m.Daemon().WaitIdle(t.Context()); err != nil {
			t.Fatal(err)
		}
		notices := 0
		for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
			if strings.Contains(m.Text, "No agent is connected") {
				notices++
			}
		}
		if notices != 1 {
			t.Errorf("%d no-agent notices, want the one before the agent listened", notices)
		}
		st.agent.call(t, "session.output", map[string]any{"session_id": string(session), "content": "On it."}, nil)
		st.await("the notice deleted when output starts", func() bool {
			m, _ := st.srv.Message(st.forum, notice.ID)
			return m.Deleted
		})
	})
}
