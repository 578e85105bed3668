package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/parley-chat/parley/core"
)

// Agents: parley may run several agents, by name (Options.Agents), and a
// session runs with one of them (core.Session.Agent, empty for the
// default). A session is made with the agent its creator names (/new
// --agent codex, the page's form, session.create), and a person switches it
// with /agent NAME: the session's agent changes and a control message
// "agent NAME" (core.ControlAgent) goes into the inbox for the agent side,
// which reads switches in order with the messages; the new agent starts its
// own conversation, which the person is told in a notice written once the
// switch is stored. /agent alone lists the agents. An unknown name is refused with
// the list of the names; so is any name when parley runs no agents.

// Agent is one agent parley runs, as people are told of it.
type Agent struct {
	// Name is what people type (core.DefaultAgent for the default).
	Name string
	// Title is the agent as people read it: "Claude Code".
	Title string
}

// agentName is name as a session keeps it: "" for the default agent. It
// refuses a name Options.Agents does not have.
func (s *Service) agentName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || name == core.DefaultAgent {
		return "", nil
	}
	if len(s.opts.Agents) == 0 {
		return "", refusal(core.ErrInvalid, fmt.Sprintf("there is no agent %q: parley runs no agents itself here (agents connect to it over MCP)", name), "")
	}
	for _, a := range s.opts.Agents {
		if a.Name == name {
			return name, nil
		}
	}
	return "", refusal(core.ErrInvalid, fmt.Sprintf("there is no agent %q; the agents are: %s", name, s.agentNames()), "")
}

// agentNames lists the names of the agents, for a refusal.
func (s *Service) agentNames() string {
	names := make([]string, 0, len(s.opts.Agents))
	for _, a := range s.opts.Agents {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// agentLabel is how people read the agent a session keeps as name: "codex
// (Codex)".
func (s *Service) agentLabel(name string) string {
	if name == "" {
		name = core.DefaultAgent
	}
	for _, a := range s.opts.Agents {
		if a.Name == name && a.Title != "" && a.Title != a.Name {
			return name + " (" + a.Title + ")"
		}
	}
	return name
}

// setAgent is /agent: with a name it switches the session to that agent,
// without one it lists the agents (a notice for the person who asked).
func (s *Service) setAgent(ctx context.Context, cmd core.Command) (core.Result, error) {
	if strings.TrimSpace(cmd.Agent) == "" {
		return s.listAgents(ctx, cmd)
	}
	name, err := s.agentName(cmd.Agent)
	if err != nil {
		return core.Result{}, err
	}
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		if sess.Agent == name {
			return change{}, refusal(core.ErrInvalid, "this session runs with "+s.agentLabel(name)+" already", "")
		}
		word := name
		if word == "" {
			word = core.DefaultAgent
		}
		msg := core.Message{Session: sess.ID, Role: core.RoleUser, Actor: cmd.Actor, Origin: cmd.Origin,
			Mime: core.MimeControl, Content: core.ControlAgent + " " + word, Ref: cmd.Ref}
		told := cmd
		told.Kind, told.Session, told.Ref, told.PlatformID = core.Notice, sess.ID, core.MessageRef{}, ""
		told.Text = fmt.Sprintf("🔀 This session now runs with %s. It starts its own conversation: it does not know what was said to %s.",
			s.agentLabel(name), s.agentLabel(sess.Agent))
		return change{
			op:  "set agent",
			msg: &msg,
			events: []core.Event{
				{Kind: core.EventHumanMessage, Session: sess.ID, Origin: cmd.Origin, Message: &msg},
				statusEvent(sess, sess.Status, cmd.Origin),
			},
			cleanup: inputCleanup(sess.ID, cmd, s.opts.Now()),
			update: func(ss *core.Session) {
				s.noteInput(ss, cmd)
				ss.Agent = name
			},
			// Told once the switch is stored; a notice that cannot be
			// stored is lost, the switch is not.
			after: func() {
				if _, err := s.notice(ctx, told); err != nil {
					s.log.Warn("the notice of an agent switch was not stored", "session", sess.ID, "err", err)
				}
			},
		}, nil
	})
}

// listAgents answers /agent without a name: the agents, the session's
// marked.
func (s *Service) listAgents(ctx context.Context, cmd core.Command) (core.Result, error) {
	sess, err := s.resolve(ctx, cmd)
	if err != nil {
		return core.Result{}, err
	}
	if len(s.opts.Agents) == 0 {
		return core.Result{}, refusal(core.ErrInvalid, "parley runs no agents itself here: agents connect to it over MCP", "")
	}
	var b strings.Builder
	b.WriteString("Agents (/agent NAME switches this session to one):")
	current := sess.Agent
	if current == "" {
		current = core.DefaultAgent
	}
	for _, a := range s.opts.Agents {
		b.WriteString("\n• " + a.Name)
		if a.Title != "" && a.Title != a.Name {
			b.WriteString(" — " + a.Title)
		}
		if a.Name == current {
			b.WriteString(" (this session's)")
		}
	}
	cmd.Text, cmd.Kind = b.String(), core.Notice
	return s.notice(ctx, cmd)
}
