package uistate

import (
	"slices"
	"strconv"
	"time"

	"github.com/parley-chat/parley/core"
)

// The UIState reducer turns a session's events into the timeline a UI shows.
//
// Decisions, where the architecture is silent:
//   - Events of another session than the state's are ignored entirely (Seq
//     included), so a per-session state can be fed the global event stream.
//   - Item ids are stable within a state's lineage: "msg:<message id>" for
//     messages, "q:<question id>" for questions, "output:<turn>" for the live
//     output, and "<type>:<position>" for items that have no id of their own
//     (tool groups, id-less notices). Items are never removed by Reduce.
//   - Queued is sticky: it records that a message arrived while the agent was
//     working. No event says when the agent read it.
//   - An answer to an unknown question is shown as a user item carrying the
//     QuestionID, so a person's input is never lost from the timeline.
//   - Cancel is a notice item with Cancel set.
//   - Source-only notices are kept, flagged SourceOnly, for the renderer to
//     decide; the reducer does not know which UI is looking.
//   - Busy follows Status (working) and, between status events, the turn: a
//     running tool call, a non-final output or a queued message sets it, a
//     turn completing clears it. A completing turn also marks its output
//     item Final.
//   - A cancel notice's Content is empty unless the event carries text; the
//     UI words it.
//   - Attachments are shown without their daemon-side Path.

// UIStateVersion is the version of the UIState JSON shape. A client that
// sees another version reloads instead of applying updates.
const UIStateVersion = "ui_state_v1"

// Envelope types of the JSON the HTTP API serves.
const (
	UISnapshotType = "ui_state_snapshot" // UISnapshot.Type of a snapshot
	UIUpdateType   = "ui_state_updated"  // UISnapshot.Type of a whole state after a change
	UIDeltaType    = "ui_state_delta"    // UIUpdate.Type: parley's opt-in delta extension
)

// UIItemType is what a timeline item shows: its "kind" on the wire (see
// uiwire.go for each kind's JSON).
type UIItemType string

// Timeline item kinds. The first three are the specification's, named
// exactly; the others are parley's own.
const (
	UIItemUser      UIItemType = "UserMessage"       // a person's message (EventHumanMessage, EventQueued)
	UIItemAssistant UIItemType = "AssistantMarkdown" // an agent's message, markdown
	UIItemToolGroup UIItemType = "ToolGroup"         // one tool call: command, approvals, output, exit code
	UIItemOutput    UIItemType = "Output"            // the live output of one turn
	UIItemNotice    UIItemType = "Notice"            // feedback, errors, cancel requests
	UIItemQuestion  UIItemType = "Question"          // ui.ask, with options and the answer
	UIItemTools     UIItemType = "ToolCalls"         // consecutive tool_activity events, grouped
)

// UIState is the view model a UI renders one session's timeline from. It is
// built by Reduce (or ReduceAll, UIReducer) from the session's events and
// served as JSON. A UIState is a value: the functions of this file never
// modify the Items of a state passed to them, so callers may keep old states.
// Callers must not modify Items in place either.
type UIState struct {
	Version string         `json:"v"`
	Seq     uint64         `json:"seq"` // Seq of the last event applied
	Session core.SessionID `json:"session_id"`
	Title   string         `json:"title"`
	Status  core.Status    `json:"status"`
	Busy    bool           `json:"busy"` // the agent is working
	// Turn counts the turns completed while this state was built; the
	// current turn's output item is "output:<Turn>".
	Turn  uint64   `json:"turn"`
	Items []UIItem `json:"items"`
}

// UIItem is one entry of the timeline. Fields a Type does not use are empty.
type UIItem struct {
	ID      string      `json:"id"`
	Type    UIItemType  `json:"kind"`
	Time    time.Time   `json:"ts,omitzero"`
	Updated time.Time   `json:"updated,omitzero"` // last in-place change
	Origin  core.Origin `json:"origin,omitempty"`
	Role    core.Role   `json:"author,omitempty"`
	Actor   core.Actor  `json:"actor,omitzero"`
	// MessageID is the inbox message the item shows, if any.
	MessageID core.MessageID `json:"message_id,omitempty"`
	Mime      string         `json:"mime,omitempty"`
	// Content is the item's text: "text" or "md" on the wire by kind.
	Content     string         `json:"-"`
	Attachments []UIAttachment `json:"attachments,omitempty"`
	// Queued marks a user message that arrived while the agent was busy.
	Queued bool `json:"queued,omitempty"`
	// Final marks an output item whose turn ended.
	Final bool `json:"final,omitempty"`
	// Cancel marks a notice that is a cancel request.
	Cancel bool `json:"cancel,omitempty"`
	// SourceOnly marks a notice meant for its origin adapter only.
	SourceOnly bool         `json:"source_only,omitempty"`
	QuestionID string       `json:"question_id,omitempty"`
	Options    []string     `json:"options,omitempty"`
	Answer     *UIAnswer    `json:"answer,omitempty"`
	Tools      []UIToolCall `json:"tools,omitempty"`
	// Closed says why a question ended without an answer: "expired" (its
	// ui.ask timed out) or "cancelled".
	Closed string `json:"closed,omitempty"`
	// ToolGroup's fields (see UIToolGroup).
	UIToolGroup
}

// UIAttachment is a file of a message as a UI shows it (no daemon path).
type UIAttachment struct {
	Name string `json:"name"`
	Mime string `json:"mime,omitempty"`
	Size int64  `json:"size"`
}

// UIAnswer is the answer given to a question item.
type UIAnswer struct {
	Content   string         `json:"content"`
	MessageID core.MessageID `json:"message_id,omitempty"`
	Actor     core.Actor     `json:"actor,omitzero"`
	Origin    core.Origin    `json:"origin,omitempty"`
	Time      time.Time      `json:"ts,omitzero"`
}

// UIToolCall is one tool call of a tools item, keyed by ToolActivity.ID.
type UIToolCall struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Status  string    `json:"status,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	Time    time.Time `json:"ts,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
}

// UISnapshot is the envelope of a whole UIState, sent first on a stream.
type UISnapshot struct {
	Type    string  `json:"type"` // UISnapshotType or UIUpdateType
	Version string  `json:"v"`
	Seq     uint64  `json:"seq"`
	State   UIState `json:"state"`
}

// UIUpdate is what changed between two states: the items added or changed
// (upserts by ID: replace in place, or append in the order given), the ids
// of items removed, and the scalar fields that changed (nil when unchanged).
// ApplyUpdate applies one; a client applies them in order the same way:
// Session, Seq and the present scalars are set, Removed are deleted, then
// Items are upserted. Applying an update twice is harmless.
type UIUpdate struct {
	Type    string         `json:"type"` // UIDeltaType
	Version string         `json:"v"`
	Seq     uint64         `json:"seq"`
	Session core.SessionID `json:"session_id"`
	Title   *string        `json:"title,omitempty"`
	Status  *core.Status   `json:"status,omitempty"`
	Busy    *bool          `json:"busy,omitempty"`
	Turn    *uint64        `json:"turn,omitempty"`
	Items   []UIItem       `json:"items,omitempty"`
	Removed []string       `json:"removed,omitempty"`
}

// Empty reports whether u changes nothing but Seq. A stream may skip it.
func (u UIUpdate) Empty() bool {
	return u.Title == nil && u.Status == nil && u.Busy == nil && u.Turn == nil &&
		len(u.Items) == 0 && len(u.Removed) == 0
}

// NewUIState returns the empty state of a session.
func NewUIState(session core.SessionID) UIState {
	return UIState{Version: UIStateVersion, Session: session, Items: []UIItem{}}
}

// Snapshot wraps s in its envelope. Items is never null in its JSON.
func Snapshot(s UIState) UISnapshot {
	s.Version = UIStateVersion
	if s.Items == nil {
		s.Items = []UIItem{}
	}
	return UISnapshot{Type: UISnapshotType, Version: UIStateVersion, Seq: s.Seq, State: s}
}

// Reduce returns the state after e. It never modifies prev. Events with
// 0 < Seq <= prev.Seq (redeliveries) and events of another session are
// ignored; events with Seq 0 always apply and leave Seq as it is.
//
// Reduce costs O(len(prev.Items)) when e changes the timeline, as it copies
// the item slice rather than write into one shared with prev. Use ReduceAll
// for batches and a UIReducer for a live stream.
func Reduce(prev UIState, e core.Event) UIState {
	r := uiReducer{s: prev, grow: 1, fresh: -1}
	r.apply(e)
	return r.s
}

// ReduceWithUpdate is Reduce that also returns what changed, for a stream.
func ReduceWithUpdate(prev UIState, e core.Event) (UIState, UIUpdate) {
	r := uiReducer{s: prev, grow: 1, fresh: -1, track: true}
	r.apply(e)
	return r.s, r.update(prev)
}

// ReduceAll folds events into prev, like calling Reduce for each, without
// modifying prev. It copies prev's items once and then works in place, in
// time linear in len(prev.Items) + len(events).
func ReduceAll(prev UIState, events []core.Event) UIState {
	if len(events) == 0 {
		prev.Version = UIStateVersion
		return prev
	}
	r := newUiReducer(prev)
	r.grow = min(len(events), 1024)
	for i := range events {
		r.apply(events[i])
	}
	return r.s
}

// UIReducer applies a stream of events to a state it owns, in place, so each
// event costs time in proportion to what it changes rather than to the whole
// timeline. It is not safe for concurrent use.
type UIReducer struct {
	r uiReducer
}

// NewUIReducer returns a reducer starting from s. s is not modified.
func NewUIReducer(s UIState) *UIReducer {
	return &UIReducer{r: newUiReducer(s)}
}

// Apply applies e and returns what changed, as ReduceWithUpdate does.
func (u *UIReducer) Apply(e core.Event) UIUpdate {
	before := u.r.s
	u.r.track = true
	u.r.dirty = u.r.dirty[:0]
	u.r.apply(e)
	// The update's tools item shares its Tools with the state: stop
	// appending to that slice in place.
	u.r.fresh = -1
	return u.r.update(before)
}

// State returns the current state. Later Apply calls do not modify it: the
// next change copies the items first.
func (u *UIReducer) State() UIState {
	u.r.owned = false
	u.r.fresh = -1
	return u.r.s
}

// Diff returns the update that turns prev into next: ApplyUpdate(prev,
// Diff(prev, next)) equals next. When next's items extend prev's (as Reduce
// makes them) it holds only the changed and new items; otherwise it removes
// every item of prev and adds every item of next.
func Diff(prev, next UIState) UIUpdate {
	u := uiScalarUpdate(prev, next)
	n := min(len(prev.Items), len(next.Items))
	for i := 0; i < n; i++ {
		if prev.Items[i].ID != next.Items[i].ID {
			for j := range prev.Items {
				u.Removed = append(u.Removed, prev.Items[j].ID)
			}
			u.Items = slices.Clone(next.Items)
			return u
		}
	}
	for i := 0; i < n; i++ {
		if &prev.Items[i] != &next.Items[i] && !uiItemEqual(&prev.Items[i], &next.Items[i]) {
			u.Items = append(u.Items, next.Items[i])
		}
	}
	for i := n; i < len(prev.Items); i++ {
		u.Removed = append(u.Removed, prev.Items[i].ID)
	}
	u.Items = append(u.Items, next.Items[n:]...)
	return u
}

// ApplyUpdate returns s with u applied, the way a client applies it. It
// never modifies s or u. It applies u whatever its Seq: callers apply
// updates in order and may drop those older than the state.
func ApplyUpdate(s UIState, u UIUpdate) UIState {
	s.Version = UIStateVersion
	s.Session = u.Session
	s.Seq = u.Seq
	if u.Title != nil {
		s.Title = *u.Title
	}
	if u.Status != nil {
		s.Status = *u.Status
	}
	if u.Busy != nil {
		s.Busy = *u.Busy
	}
	if u.Turn != nil {
		s.Turn = *u.Turn
	}
	if len(u.Removed) == 0 && len(u.Items) == 0 {
		return s
	}
	items := make([]UIItem, 0, len(s.Items)+len(u.Items))
	if len(u.Removed) > 0 {
		drop := make(map[string]bool, len(u.Removed))
		for _, id := range u.Removed {
			drop[id] = true
		}
		for _, it := range s.Items {
			if !drop[it.ID] {
				items = append(items, it)
			}
		}
	} else {
		items = append(items, s.Items...)
	}
	pos := make(map[string]int, len(items))
	for i := range items {
		pos[items[i].ID] = i
	}
	for _, it := range u.Items {
		if p, ok := pos[it.ID]; ok {
			items[p] = it
			continue
		}
		pos[it.ID] = len(items)
		items = append(items, it)
	}
	s.Items = items
	return s
}

// uiReducer applies events to s. Until owned, s.Items is shared with the
// caller's state and is copied before the first change; with idx nil,
// lookups scan the items instead of using the maps.
type uiReducer struct {
	s     UIState
	owned bool
	grow  int // spare capacity to give the copy of the items
	// fresh is the position of the tools item whose Tools slice this
	// reducer allocated and may append to in place, or -1.
	fresh int
	idx   map[string]int // item id → position
	tools map[string]int // tool call id → position of its tools item
	track bool
	dirty []int // positions changed, when track
}

func newUiReducer(s UIState) uiReducer {
	s.Version = UIStateVersion
	r := uiReducer{s: s, fresh: -1, grow: 16,
		idx: make(map[string]int, len(s.Items)), tools: make(map[string]int)}
	for i := range s.Items {
		r.idx[s.Items[i].ID] = i
		for _, c := range s.Items[i].Tools {
			if c.ID != "" {
				r.tools[c.ID] = i
			}
		}
	}
	return r
}

func (r *uiReducer) apply(e core.Event) {
	r.s.Version = UIStateVersion
	if e.Seq != 0 && e.Seq <= r.s.Seq {
		return
	}
	if e.Session != "" && r.s.Session != "" && e.Session != r.s.Session {
		return
	}
	if r.s.Session == "" {
		r.s.Session = e.Session
	}
	if e.Seq != 0 {
		r.s.Seq = e.Seq
	}
	switch e.Kind {
	case core.EventSessionCreated, core.EventSessionUpdated:
		if e.Title != "" {
			r.s.Title = e.Title
		}
		if e.Status != "" {
			r.s.Status = e.Status
			r.s.Busy = e.Status == core.StatusWorking
		}
	case core.EventHumanMessage:
		r.message(e, UIItemUser)
	case core.EventQueued:
		r.s.Busy = true
		r.message(e, UIItemUser)
	case core.EventAssistant:
		r.message(e, UIItemAssistant)
	case core.EventNotice, core.EventCancel:
		r.message(e, UIItemNotice)
	case core.EventOutput:
		r.output(e)
	case core.EventTurnComplete:
		if p, ok := r.find(r.outputID()); ok && !r.s.Items[p].Final {
			it := r.s.Items[p]
			it.Final = true
			it.Updated = e.Time
			r.set(p, it)
		}
		r.s.Turn++
		r.s.Busy = false
	case core.EventQuestion:
		r.question(e)
	case core.EventAnswer:
		r.answer(e)
	case core.EventToolActivity:
		r.tool(e)
	case core.EventToolCall, core.EventToolOutput, core.EventToolApproval:
		r.toolGroup(e)
	case core.EventQuestionClosed:
		r.questionClosed(e)
	}
}

// messageItem builds the item an event's message shows; ok is false when
// the event carries nothing to show.
func (r *uiReducer) messageItem(e core.Event, t UIItemType) (UIItem, bool) {
	it := UIItem{Type: t, Time: e.Time, Origin: e.Origin, Content: e.Text,
		QuestionID: e.QuestionID, SourceOnly: e.SourceOnly, Cancel: e.Kind == core.EventCancel}
	if m := e.Message; m != nil {
		it.MessageID, it.Role, it.Actor, it.Mime, it.Content = m.ID, m.Role, m.Actor, m.Mime, m.Content
		if !m.Time.IsZero() {
			it.Time = m.Time
		}
		if m.Origin != "" {
			it.Origin = m.Origin
		}
		for _, a := range m.Attachments {
			it.Attachments = append(it.Attachments, UIAttachment{Name: a.Name, Mime: a.Mime, Size: a.Size})
		}
	} else if e.Text == "" && !it.Cancel {
		return it, false
	}
	if it.Role == "" {
		switch t {
		case UIItemUser:
			it.Role = core.RoleUser
		case UIItemNotice:
			it.Role = core.RoleSystem
		default:
			it.Role = core.RoleAssistant
		}
	}
	it.Queued = e.Kind == core.EventQueued
	if it.MessageID != "" {
		it.ID = "msg:" + string(it.MessageID)
	}
	return it, true
}

// message shows a user, assistant or notice message once per message id;
// a redelivery only adds Queued.
func (r *uiReducer) message(e core.Event, t UIItemType) {
	it, ok := r.messageItem(e, t)
	if !ok {
		return
	}
	if it.ID != "" {
		if p, ok := r.find(it.ID); ok {
			if old := r.s.Items[p]; old.Type == t && it.Queued && !old.Queued {
				old.Queued = true
				r.set(p, old)
			}
			return
		}
	}
	r.add(it)
}

func (r *uiReducer) outputID() string { return "output:" + strconv.FormatUint(r.s.Turn, 10) }

func (r *uiReducer) output(e core.Event) {
	if !e.Final {
		r.s.Busy = true
	}
	id := r.outputID()
	if p, ok := r.find(id); ok {
		it := r.s.Items[p]
		if it.Content == e.Text && it.Final == e.Final {
			return
		}
		it.Content, it.Final, it.Updated = e.Text, e.Final, e.Time
		r.set(p, it)
		return
	}
	r.add(UIItem{ID: id, Type: UIItemOutput, Time: e.Time, Origin: e.Origin, Role: core.RoleAssistant,
		Mime: core.MimeMarkdown, Content: e.Text, Final: e.Final})
}

func (r *uiReducer) question(e core.Event) {
	it, ok := r.messageItem(e, UIItemQuestion)
	if !ok && len(e.Options) == 0 {
		return
	}
	it.Type, it.Options, it.Queued = UIItemQuestion, slices.Clone(e.Options), false
	if e.QuestionID != "" {
		it.ID = "q:" + e.QuestionID
	}
	if it.ID != "" {
		if p, ok := r.find(it.ID); ok {
			old := r.s.Items[p]
			if old.Type != UIItemQuestion {
				return
			}
			it.Answer = old.Answer
			if !uiItemEqual(&old, &it) {
				r.set(p, it)
			}
			return
		}
	}
	r.add(it)
}

func (r *uiReducer) answer(e core.Event) {
	if e.QuestionID != "" {
		if p, ok := r.find("q:" + e.QuestionID); ok && r.s.Items[p].Type == UIItemQuestion {
			a := &UIAnswer{Content: e.Text, Origin: e.Origin, Time: e.Time}
			if m := e.Message; m != nil {
				a.Content, a.MessageID, a.Actor = m.Content, m.ID, m.Actor
				if !m.Time.IsZero() {
					a.Time = m.Time
				}
				if m.Origin != "" {
					a.Origin = m.Origin
				}
			}
			it := r.s.Items[p]
			if it.Answer != nil && *it.Answer == *a {
				return
			}
			it.Answer, it.Updated = a, e.Time
			r.set(p, it)
			return
		}
	}
	r.message(e, UIItemUser)
}

func (r *uiReducer) tool(e core.Event) {
	t := e.Tool
	if t == nil {
		return
	}
	if t.Status == "running" {
		r.s.Busy = true
	}
	if t.ID != "" {
		if p, ok := r.findTool(t.ID); ok {
			it := r.s.Items[p]
			i := slices.IndexFunc(it.Tools, func(c UIToolCall) bool { return c.ID == t.ID })
			c := it.Tools[i]
			old := c
			if t.Name != "" {
				c.Name = t.Name
			}
			if t.Status != "" {
				c.Status = t.Status
			}
			if t.Detail != "" {
				c.Detail = t.Detail
			}
			if c == old {
				return
			}
			c.Updated = e.Time
			if p != r.fresh {
				it.Tools = slices.Clone(it.Tools)
				r.fresh = p
			}
			it.Tools[i] = c
			it.Updated = e.Time
			r.set(p, it)
			return
		}
	}
	c := UIToolCall{ID: t.ID, Name: t.Name, Status: t.Status, Detail: t.Detail, Time: e.Time}
	if last := len(r.s.Items) - 1; last >= 0 && r.s.Items[last].Type == UIItemTools {
		it := r.s.Items[last]
		if last != r.fresh {
			it.Tools = append(it.Tools[:len(it.Tools):len(it.Tools)], c)
			r.fresh = last
		} else {
			it.Tools = append(it.Tools, c)
		}
		it.Updated = e.Time
		r.set(last, it)
		r.noteTool(t.ID, last)
		return
	}
	r.add(UIItem{Type: UIItemTools, Time: e.Time, Origin: e.Origin, Role: core.RoleAssistant,
		Tools: []UIToolCall{c}})
	r.fresh = len(r.s.Items) - 1
	r.noteTool(t.ID, r.fresh)
}

func (r *uiReducer) noteTool(id string, p int) {
	if r.tools != nil && id != "" {
		r.tools[id] = p
	}
}

// find returns the position of the item with id. Scans go from the end,
// where lookups mostly land, so both modes agree on the last duplicate of
// a malformed state.
func (r *uiReducer) find(id string) (int, bool) {
	if r.idx != nil {
		p, ok := r.idx[id]
		return p, ok
	}
	for i := len(r.s.Items) - 1; i >= 0; i-- {
		if r.s.Items[i].ID == id {
			return i, true
		}
	}
	return -1, false
}

func (r *uiReducer) findTool(id string) (int, bool) {
	if r.tools != nil {
		p, ok := r.tools[id]
		return p, ok
	}
	for i := len(r.s.Items) - 1; i >= 0; i-- {
		if r.s.Items[i].Type == UIItemTools &&
			slices.ContainsFunc(r.s.Items[i].Tools, func(c UIToolCall) bool { return c.ID == id }) {
			return i, true
		}
	}
	return -1, false
}

// own makes s.Items a slice this reducer may write to.
func (r *uiReducer) own() {
	if r.owned {
		return
	}
	items := make([]UIItem, len(r.s.Items), len(r.s.Items)+max(r.grow, 1))
	copy(items, r.s.Items)
	r.s.Items = items
	r.owned = true
}

func (r *uiReducer) set(p int, it UIItem) {
	r.own()
	r.s.Items[p] = it
	if r.track {
		r.dirty = append(r.dirty, p)
	}
}

// add appends it, giving it a positional id if it has none (or a taken one).
func (r *uiReducer) add(it UIItem) {
	if it.ID == "" {
		it.ID = uiIDPrefix(it.Type) + ":" + strconv.Itoa(len(r.s.Items))
	}
	for {
		if _, taken := r.find(it.ID); !taken {
			break
		}
		it.ID += "'"
	}
	r.own()
	r.s.Items = append(r.s.Items, it)
	p := len(r.s.Items) - 1
	if r.idx != nil {
		r.idx[it.ID] = p
	}
	if r.track {
		r.dirty = append(r.dirty, p)
	}
}

// update describes the change from before to r.s.
func (r *uiReducer) update(before UIState) UIUpdate {
	u := uiScalarUpdate(before, r.s)
	slices.Sort(r.dirty)
	for _, p := range slices.Compact(r.dirty) {
		u.Items = append(u.Items, r.s.Items[p])
	}
	return u
}

func uiScalarUpdate(prev, next UIState) UIUpdate {
	u := UIUpdate{Type: UIDeltaType, Version: UIStateVersion, Seq: next.Seq, Session: next.Session}
	if prev.Title != next.Title {
		u.Title = &next.Title
	}
	if prev.Status != next.Status {
		u.Status = &next.Status
	}
	if prev.Busy != next.Busy {
		u.Busy = &next.Busy
	}
	if prev.Turn != next.Turn {
		u.Turn = &next.Turn
	}
	return u
}

// uiItemEqual compares items strictly (time.Time by ==) so that an item
// Diff leaves out marshals exactly like the one it stands for.
func uiItemEqual(a, b *UIItem) bool {
	return a.ID == b.ID && a.Type == b.Type && a.Time == b.Time && a.Updated == b.Updated &&
		a.Origin == b.Origin && a.Role == b.Role && a.Actor == b.Actor &&
		a.MessageID == b.MessageID && a.Mime == b.Mime && a.Content == b.Content &&
		a.Queued == b.Queued && a.Final == b.Final && a.Cancel == b.Cancel &&
		a.SourceOnly == b.SourceOnly && a.QuestionID == b.QuestionID &&
		slices.Equal(a.Attachments, b.Attachments) && slices.Equal(a.Options, b.Options) &&
		slices.Equal(a.Tools, b.Tools) && a.Closed == b.Closed && a.UIToolGroup.equal(&b.UIToolGroup) &&
		(a.Answer == b.Answer || a.Answer != nil && b.Answer != nil && *a.Answer == *b.Answer)
}
