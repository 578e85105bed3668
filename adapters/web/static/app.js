// parley's web page. Plain JavaScript, no build step, nothing from elsewhere.
//
// The timeline of the selected session is rendered only from its UiState:
// the snapshot from GET /api/sessions/{id}/state, then the `ui` updates that
// come with its events on /api/events, applied like core.ApplyUpdate (items
// upserted by id). An event of the selected session without `ui`, or a
// `resync`, reloads the snapshot. Text is never put into the page as HTML:
// markdown.js turns markdown into DOM nodes holding text nodes.
//
// The daemon ends every event stream after a while (or to make room) and
// says so with a `reconnect` message; EventSource reconnects with
// Last-Event-ID and the daemon sends what happened meanwhile. Such a
// reconnect is invisible: the page stays "live" through it and reloads
// nothing. Only a new EventSource, which has no Last-Event-ID, loads the
// sessions and the snapshot again.
//
// With a token configured, the API answers 401 until the page sends it: the
// page then asks for it in a small form (the token box), checks it against
// the API before keeping it in localStorage, and says plainly when it is
// refused. #token=… in the URL still works and is taken out of the URL.
//
// Archived sessions are the closed ones (see manage.go): the list hides them
// unless "Show archived" is ticked. Below 720 px the list is a drawer
// opened from the header.
'use strict';

const KINDS = ['session_created', 'session_updated', 'human_message', 'queued', 'assistant_message',
  'output', 'turn_complete', 'notice', 'question', 'answer', 'cancel', 'tool_activity', 'question_closed',
  'tool_call', 'tool_output', 'tool_approval'];
const TOKEN_KEY = 'parley.token';
const ARCHIVED_KEY = 'parley.showArchived';
const NARROW = window.matchMedia('(max-width: 720px)');
// Status words; the colours are in style.css (no emoji: a headless or
// minimal system may have no emoji font).
const STATUS = { idle: 'idle', working: 'working', waiting: 'waiting for you', closed: 'closed' };

const $ = (id) => document.getElementById(id);

const app = {
  token: '',
  sessions: [],
  sessionPages: 1, // pages of GET /api/sessions shown
  sessionsNext: '', // the cursor of the next page, '' when all are shown
  view: null, // {id, state, loading, again, queue, els: Map}
  es: null,
  sessionsTimer: 0,
  needToken: false, // the token box is up; the event stream waits for it
  showArchived: localStorage.getItem(ARCHIVED_KEY) === '1',
  runAgents: [], // the agents parley runs (GET /api/agents/run), the default first
};

// ---- token and location ---------------------------------------------------

function hashParams() { return new URLSearchParams(location.hash.slice(1)); }

function setHash(p) {
  const s = p.toString();
  history.replaceState(null, '', location.pathname + location.search + (s ? '#' + s : ''));
}

// A token given as #token=… is kept in localStorage and taken out of the URL.
// It reports whether the token changed.
function initToken() {
  const before = app.token;
  const p = hashParams();
  if (p.has('token')) {
    const t = p.get('token');
    if (t) localStorage.setItem(TOKEN_KEY, t); else localStorage.removeItem(TOKEN_KEY);
    p.delete('token');
    setHash(p);
  }
  app.token = localStorage.getItem(TOKEN_KEY) || '';
  return app.token !== before;
}

function selectedFromHash() { return hashParams().get('session') || ''; }

// ---- API ------------------------------------------------------------------

async function api(method, path, body) {
  const headers = {};
  if (app.token) headers.Authorization = 'Bearer ' + app.token;
  const init = { method, headers };
  // parley takes changes only as JSON, which a cross-site form cannot
  // send: every POST says so, with a body or without.
  if (body !== undefined || method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body === undefined ? {} : body);
  }
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (_) { /* not JSON */ }
  if (res.status === 401) askToken();
  if (!res.ok) {
    const err = new Error((data && data.error) || res.status + ' ' + res.statusText);
    err.status = res.status;
    throw err;
  }
  return data;
}

function clientID() {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function showBanner(text) {
  const b = $('banner');
  b.textContent = text;
  b.hidden = !text;
}

function reportError(err) {
  if (err && err.status === 401) return; // the token box says what to do
  showBanner(err ? err.message || String(err) : '');
}

// ---- the token box ------------------------------------------------------------

// askToken shows the token box. A token this browser kept and the API now
// refuses (changed in the configuration) is said to be refused; with none
// kept, the box only asks.
function askToken() {
  if (app.needToken) return;
  app.needToken = true;
  if (app.es) { app.es.close(); app.es = null; }
  setConn('offline');
  tokenError(app.token ? 'The token this browser kept was refused; enter the current one.' : '');
  $('token-box').hidden = false;
  $('token-input').focus();
}

function tokenError(text) {
  const e = $('token-error');
  e.textContent = text;
  e.hidden = !text;
}

// submitToken checks the token against the API before keeping it, so a
// mistyped token is refused here rather than remembered.
async function submitToken(ev) {
  ev.preventDefault();
  const input = $('token-input');
  const token = input.value.trim();
  if (!token) { tokenError('Enter the token.'); input.focus(); return; }
  $('token-submit').disabled = true;
  try {
    const res = await fetch('/api/sessions', { headers: { Authorization: 'Bearer ' + token } });
    if (res.status === 401) {
      tokenError('That token was refused. Check http.token in parley\'s configuration and try again.');
      input.select();
      return;
    }
    if (!res.ok) {
      let msg = res.status + ' ' + res.statusText;
      try { msg = (await res.json()).error || msg; } catch (_) { /* not JSON */ }
      tokenError('parley did not answer as expected: ' + msg);
      return;
    }
    localStorage.setItem(TOKEN_KEY, token);
    app.token = token;
    app.needToken = false;
    input.value = '';
    tokenError('');
    $('token-box').hidden = true;
    showBanner('');
    connect();
  } catch (err) {
    tokenError('parley could not be reached: ' + (err.message || err));
  } finally {
    $('token-submit').disabled = false;
  }
}

// ---- sessions list ----------------------------------------------------------

// The list shows the newest sessions, a page (100) at a time: "Older
// sessions" asks for one more page, and a refresh re-reads as many pages as
// are shown, so that thousands of sessions cost the page nothing until
// someone scrolls back to them.
async function refreshSessions() {
  try {
    const all = [];
    let next = '';
    for (let i = 0; i < app.sessionPages; i++) {
      const data = await api('GET', '/api/sessions' + (next ? '?cursor=' + encodeURIComponent(next) : ''));
      all.push(...(data.sessions || []));
      next = data.next || '';
      if (!next) break;
    }
    app.sessions = all;
    app.sessionsNext = next;
    renderSessions();
  } catch (err) {
    reportError(err);
  }
}

function olderSessions() {
  app.sessionPages++;
  refreshSessions();
}

function scheduleSessions() {
  clearTimeout(app.sessionsTimer);
  app.sessionsTimer = setTimeout(refreshSessions, 150);
}

function renderSessions() {
  const nav = $('sessions');
  const list = app.sessions.slice().sort((a, b) => (b.updated || '').localeCompare(a.updated || '') ||
    b.id.localeCompare(a.id));
  nav.replaceChildren();
  const selected = app.view && app.view.id;
  const archived = list.filter((s) => s.status === 'closed').length;
  const shown = list.filter((s) => app.showArchived || s.status !== 'closed' || s.id === selected);
  $('archived-count').textContent = archived ? '(' + archived + ')' : '';
  if (list.length === 0) {
    nav.append(el('p', 'none', 'No sessions yet.'));
  } else if (shown.length === 0) {
    nav.append(el('p', 'none', 'No open sessions.'));
  }
  for (const s of shown) {
    const a = el('a', 'session');
    a.href = '#session=' + encodeURIComponent(s.id);
    a.dataset.id = s.id;
    if (s.status === 'closed') a.classList.add('archived');
    if (app.view && app.view.id === s.id) a.classList.add('selected');
    const dot = el('span', 'dot');
    dot.dataset.status = s.status;
    a.append(dot, el('span', 'title', s.title || s.id),
      el('span', 'when', (STATUS[s.status] || s.status) + ' · ' + when(s.updated)));
    nav.append(a);
  }
  if (app.sessionsNext) {
    const more = el('button', 'more', 'Older sessions');
    more.type = 'button';
    more.addEventListener('click', olderSessions);
    nav.append(more);
  }
  const cur = app.view && app.sessions.find((s) => s.id === app.view.id);
  if (cur) renderHeader(app.view.state, cur);
}

// The agents parley runs: with more than one, the new-session form offers
// them, and the header names the session's.
async function loadAgents() {
  try {
    const data = await api('GET', '/api/agents/run');
    app.runAgents = data.agents || [];
  } catch (err) {
    reportError(err);
    return;
  }
  const pick = $('new-agent');
  const chosen = pick.value;
  pick.replaceChildren();
  for (const a of app.runAgents) {
    const o = el('option', '', agentLabel(a.name));
    o.value = a.name === 'default' ? '' : a.name;
    pick.append(o);
  }
  pick.value = chosen;
  if (pick.selectedIndex < 0) pick.selectedIndex = 0;
  pick.hidden = app.runAgents.length < 2;
  if (app.view) renderHeader(app.view.state, app.sessions.find((s) => s.id === app.view.id));
}

// agentLabel is how the page names an agent: "codex (Codex)".
function agentLabel(name) {
  const a = app.runAgents.find((x) => x.name === (name || 'default'));
  const n = name || 'default';
  return a && a.title && a.title !== n ? n + ' (' + a.title + ')' : n;
}

async function createSession(ev) {
  ev.preventDefault();
  const input = $('new-title');
  $('new-button').disabled = true;
  try {
    const s = await api('POST', '/api/sessions', { title: input.value.trim(), agent: $('new-agent').value, client_id: clientID() });
    input.value = '';
    app.sessions.push(s);
    select(s.id);
    scheduleSessions();
  } catch (err) {
    reportError(err);
  } finally {
    $('new-button').disabled = false;
  }
}

// ---- the selected session ---------------------------------------------------

function select(id) {
  setDrawer(!id && NARROW.matches);
  const p = hashParams();
  if (id) p.set('session', id); else p.delete('session');
  setHash(p);
  if (app.view && app.view.id === id) return;
  app.view = id ? { id, state: null, loading: false, again: false, queue: [], els: new Map() } : null;
  renderSessions();
  renderAll();
  // The snapshot must be read after the event stream is open, or events
  // between the two would be missed; the stream's onopen loads it otherwise.
  // A stream that reconnects resumes after the last event it had, which
  // was before the snapshot: nothing is missed meanwhile either.
  const es = app.es;
  if (id && es && (es.readyState === EventSource.OPEN || (es.resumes && es.readyState !== EventSource.CLOSED))) {
    loadSnapshot();
  }
}

async function loadSnapshot() {
  const v = app.view;
  if (!v) return;
  if (v.loading) { v.again = true; return; }
  v.loading = true;
  try {
    const snap = await api('GET', '/api/sessions/' + encodeURIComponent(v.id) + '/state');
    if (app.view !== v) return;
    if (snap.v !== 'ui_state_v1') throw new Error('this page is older than the daemon: reload it');
    v.state = Object.assign({}, snap.state, { items: (snap.state.items || []).map(norm) });
    showBanner('');
    renderAll();
  } catch (err) {
    if (app.view === v && err.status === 404) select('');
    reportError(err);
  } finally {
    v.loading = false;
  }
  if (app.view !== v) return;
  if (v.again) { v.again = false; loadSnapshot(); return; }
  const queued = v.queue;
  v.queue = [];
  for (const d of queued) onSessionEvent(v, d);
}

function onSessionEvent(v, d) {
  if (v.loading || !v.state) {
    v.queue.push(d);
    if (v.queue.length > 2000) { v.queue = []; v.again = true; } // a later snapshot has them all
    return;
  }
  if (d.seq <= v.state.seq) return;
  if (!d.ui) { loadSnapshot(); return; }
  const before = v.state;
  v.state = applyUpdate(v.state, d.ui);
  renderUpdate(before, d.ui);
}

// KIND_TYPE names the wire kinds (ui_state_v1) the way the page's renderer
// does; norm gives an item its text as content, from text or md.
const KIND_TYPE = { UserMessage: 'user', AssistantMarkdown: 'assistant', Output: 'output', Notice: 'notice',
  Question: 'question', ToolCalls: 'tools', ToolGroup: 'toolgroup' };
function norm(it) {
  return Object.assign({}, it, { type: KIND_TYPE[it.kind] || it.kind, content: it.text !== undefined ? it.text : it.md });
}

// applyUpdate mirrors core.ApplyUpdate.
function applyUpdate(s, u) {
  const n = Object.assign({}, s, { session_id: u.session_id, seq: u.seq });
  for (const k of ['title', 'status', 'busy', 'turn']) if (k in u && u[k] !== null) n[k] = u[k];
  let items = s.items || [];
  if (u.removed && u.removed.length) {
    const drop = new Set(u.removed);
    items = items.filter((it) => !drop.has(it.id));
  } else {
    items = items.slice();
  }
  if (u.items && u.items.length) {
    const pos = new Map(items.map((it, i) => [it.id, i]));
    for (const raw of u.items) {
      const it = norm(raw);
      if (pos.has(it.id)) items[pos.get(it.id)] = it;
      else { pos.set(it.id, items.length); items.push(it); }
    }
  }
  n.items = items;
  return n;
}

// ---- rendering ----------------------------------------------------------------

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function when(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  if (isNaN(d)) return '';
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' +
      d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

function renderHeader(st, info) {
  const title = (st && st.title) || (info && info.title) || (app.view ? app.view.id : 'No session selected');
  $('session-title').textContent = title;
  document.title = app.view ? title + ' · parley' : 'parley';
  const badge = $('session-status');
  const status = (st && st.status) || (info && info.status) || '';
  if (!app.view || !status) {
    badge.hidden = true;
  } else {
    badge.hidden = false;
    badge.dataset.status = status;
    badge.replaceChildren(el('span', 'dot'), document.createTextNode(STATUS[status] || status));
    badge.firstChild.dataset.status = status;
  }
  const meta = $('session-meta');
  meta.replaceChildren();
  if (app.view) {
    meta.append(el('code', 'sid', app.view.id));
    if (app.runAgents.length > 0) meta.append(el('span', 'agent', 'agent: ' + agentLabel(info && info.agent)));
    // Presence first: "working" means nothing when nobody listens.
    if (app.agents && !listening(app.agents, app.view.id)) meta.append(el('span', 'noagent', 'no agent connected'));
    else if (st && st.busy) meta.append(el('span', 'busy', 'agent is working'));
  }
  const closed = status === 'closed';
  $('session-actions').hidden = !app.view || closed;
  if (!app.view || closed) {
    $('rename-form').hidden = true;
    $('archive-confirm').hidden = true;
  }
  $('input').disabled = !app.view || closed;
  $('send').disabled = !app.view || closed;
  $('input').placeholder = closed ? 'This session is closed.'
    : NARROW.matches ? 'Write a message…' : 'Write a message…  (Enter sends, Shift+Enter for a new line)';
}

function renderAll() {
  const v = app.view;
  const tl = $('timeline');
  tl.replaceChildren();
  renderHeader(v && v.state, v && app.sessions.find((s) => s.id === v.id));
  if (!v) {
    tl.append(emptyNote());
    return;
  }
  v.els = new Map();
  if (!v.state) {
    tl.append(el('p', 'loading', 'Loading…'));
    return;
  }
  if (v.state.items.length === 0) {
    tl.append(el('p', 'none', 'No messages yet. Say something below; a connected agent will read it.'));
  }
  for (const it of v.state.items) {
    const e = renderItem(it);
    v.els.set(it.id, e);
    tl.append(e);
  }
  tl.scrollTop = tl.scrollHeight;
}

function emptyNote() {
  const d = el('div', 'empty');
  d.append(el('p', '', 'Pick a session on the left, or start a new one.'),
    el('p', 'hint', 'Agents read and answer over MCP; what you write here lands in the session\'s inbox.'));
  return d;
}

function renderUpdate(before, u) {
  const v = app.view;
  const tl = $('timeline');
  const atBottom = tl.scrollHeight - tl.scrollTop - tl.clientHeight < 80;
  if ('title' in u || 'status' in u || 'busy' in u) {
    renderHeader(v.state, app.sessions.find((s) => s.id === v.id));
  }
  if ((before.items || []).length === 0 && v.state.items.length > 0) {
    tl.replaceChildren();
  }
  for (const id of u.removed || []) {
    const e = v.els.get(id);
    if (e) e.remove();
    v.els.delete(id);
  }
  for (const it of (u.items || []).map(norm)) {
    const e = renderItem(it);
    const old = v.els.get(it.id);
    if (old) old.replaceWith(e); else tl.append(e);
    v.els.set(it.id, e);
  }
  if (atBottom) tl.scrollTop = tl.scrollHeight;
}

function renderItem(it) {
  const box = el('article', 'item ' + it.type);
  box.dataset.id = it.id;
  if (it.kind === 'ToolGroup') {
    box.classList.add('toolgroup-item');
    renderToolGroup(it, box);
    return box;
  }
  switch (it.type) {
    case 'user': {
      const b = el('div', 'bubble');
      markdown(it.content || '', b);
      attachments(it, b);
      box.append(b, meta(it, [it.queued ? 'queued' : '']));
      break;
    }
    case 'assistant': {
      const b = el('div', 'bubble md');
      markdown(it.content || '', b);
      attachments(it, b);
      box.append(b, meta(it));
      break;
    }
    case 'output': {
      const head = el('div', 'output-head');
      head.append(el('span', 'label', 'Output'),
        el('span', it.final ? 'state final' : 'state live', it.final ? 'final' : 'streaming…'));
      const b = el('div', 'bubble md');
      if (it.content) markdown(it.content, b); else b.append(el('p', 'muted', '…'));
      box.append(head, b);
      if (!it.final) box.classList.add('live');
      break;
    }
    case 'notice': {
      const text = it.content || (it.cancel ? 'Cancel requested' : '');
      const b = el('div', 'notice-text');
      markdown(text, b);
      box.append(b);
      break;
    }
    case 'question':
      renderQuestion(it, box);
      break;
    case 'tools':
      renderTools(it, box);
      break;
    default:
      box.append(el('div', 'bubble', it.content || ''));
  }
  return box;
}

function meta(it, extra) {
  const m = el('div', 'item-meta');
  const who = (it.actor && it.actor.name) || (it.author === 'assistant' ? 'Agent' : '') || it.origin || '';
  const parts = [who, it.origin && it.origin !== who ? 'via ' + it.origin : '', when(it.ts)]
    .concat(extra || []).filter(Boolean);
  m.textContent = parts.join(' · ');
  return m;
}

function attachments(it, parent) {
  if (!it.attachments || !it.attachments.length) return;
  const ul = el('ul', 'attachments');
  for (const a of it.attachments) ul.append(el('li', '', 'Attachment: ' + a.name + ' (' + size(a.size) + ')'));
  parent.append(ul);
}

function size(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' B';
}

function renderQuestion(it, box) {
  const b = el('div', 'bubble md');
  markdown(it.content || '', b);
  const opts = el('div', 'options');
  (it.options || []).forEach((label, i) => {
    const btn = el('button', 'option', label);
    btn.type = 'button';
    if (it.answer) {
      btn.disabled = true;
      if (it.answer.content === label) btn.classList.add('chosen');
    } else if (it.question_id) {
      btn.addEventListener('click', () => answer(it, i + 1, opts));
    } else {
      btn.disabled = true;
    }
    opts.append(btn);
  });
  box.append(el('div', 'q-label', 'Question'), b, opts);
  if (it.closed && !it.answer) {
    for (const btn of opts.querySelectorAll('button')) btn.disabled = true;
    box.append(meta(it, [it.closed === 'cancelled' ? 'withdrawn — no longer open' : 'expired — no longer open']));
  } else if (it.answer) {
    const who = (it.answer.actor && it.answer.actor.name) || it.answer.origin || 'someone';
    box.append(el('div', 'item-meta', 'Answered “' + it.answer.content + '” · ' + who + ' · ' + when(it.answer.ts)));
  } else {
    box.append(meta(it, ['waiting for an answer']));
  }
}

async function answer(it, option, opts) {
  for (const b of opts.querySelectorAll('button')) b.disabled = true;
  try {
    await api('POST', '/api/sessions/' + encodeURIComponent(app.view.id) + '/answer',
      { question_id: it.question_id, option });
  } catch (err) {
    for (const b of opts.querySelectorAll('button')) b.disabled = false;
    reportError(err);
  }
}

const TOOL_ICON = { running: '•', ok: '✓', error: '✗' };

function renderTools(it, box) {
  const tools = it.tools || [];
  const running = tools.filter((t) => t.status === 'running').length;
  const failed = tools.filter((t) => t.status === 'error').length;
  const d = el('details', 'tools');
  if (running || failed) d.open = true;
  const sum = el('summary', '', tools.length + (tools.length === 1 ? ' tool call' : ' tool calls') +
    (running ? ' · ' + running + ' running' : '') + (failed ? ' · ' + failed + ' failed' : ''));
  const ul = el('ul', '');
  for (const t of tools) {
    const li = el('li', 'tool ' + (t.status || ''));
    li.append(el('span', 'icon', TOOL_ICON[t.status] || '•'), el('code', 'name', t.name || t.id));
    if (t.detail) li.append(el('span', 'detail', t.detail));
    ul.append(li);
  }
  d.append(sum, ul);
  box.append(d);
}

const DECISION = { approve: 'approved', approve_always: 'always allowed', deny_continue: 'denied, go on', deny_abort: 'denied, abort' };

// renderToolGroup shows one tool call reported by ui.tool_call: tool,
// command, state and decisions in the summary; the output tails inside,
// open when the call failed.
function renderToolGroup(it, box) {
  const running = it.exit_code === null || it.exit_code === undefined;
  const failed = !running && it.exit_code !== 0;
  const state = running ? 'running' : failed ? 'error' : 'ok';
  const d = el('details', 'toolgroup ' + state);
  d.open = failed;
  const sum = el('summary', '');
  sum.append(el('span', 'icon', TOOL_ICON[state]), el('code', 'name', it.tool || it.call_id));
  if (it.cmd) sum.append(el('code', 'cmd', it.cmd));
  sum.append(el('span', 'state', running ? 'running' : 'exit ' + it.exit_code));
  // approvals: the decisions' kinds; approvals_detail (parley's
  // extension): who made them, entry for entry.
  const approvals = it.approvals || [];
  const detail = (it.approvals_detail || []).length === approvals.length ? it.approvals_detail : [];
  approvals.forEach((decision, i) => {
    const a = detail[i] || {};
    const who = (a.actor && a.actor.name) || a.origin || '';
    sum.append(el('span', 'approval ' + decision, (DECISION[decision] || decision) + (who ? ' by ' + who : '')));
  });
  d.append(sum);
  for (const name of ['stdout', 'stderr']) {
    if (!it[name]) continue;
    d.append(el('div', 'stream', name), el('pre', name, it[name]));
  }
  box.append(d);
}

// ---- live events ----------------------------------------------------------------

function connect() {
  if (app.es) app.es.close();
  app.es = null;
  if (app.needToken) return;
  // ui=delta: each event carries what it changed (parley's extension).
  const url = '/api/events?ui=delta' + (app.token ? '&access_token=' + encodeURIComponent(app.token) : '');
  const es = new EventSource(url);
  app.es = es;
  setConn('connecting');
  // resumes: the stream gave an id, so a reconnect sends Last-Event-ID
  // and the daemon replays what it missed. planned: it said it ends.
  es.resumes = false;
  es.planned = false;
  es.onopen = () => {
    es.planned = false;
    setConn('live');
    if (es.resumes) return;
    // A first connection: the snapshot has what happened before it.
    refreshSessions();
    loadAgents();
    if (app.view) loadSnapshot();
  };
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) {
      // Refused (401, 503): the browser gives up; try again ourselves,
      // unless the token box is up (submitting it connects).
      setConn('offline');
      refreshSessions();
      setTimeout(() => { if (app.es === es && !app.needToken) connect(); }, 3000);
    } else if (es.planned) {
      // The end the daemon announced: EventSource reconnects in a
      // second. Should that fail, the next error says so.
      es.planned = false;
    } else {
      setConn('connecting');
    }
  };
  const seen = (ev) => { if (ev.lastEventId) es.resumes = true; };
  for (const k of KINDS) es.addEventListener(k, (ev) => { seen(ev); onEvent(ev); });
  es.addEventListener('agents', (ev) => {
    seen(ev);
    try { app.agents = JSON.parse(ev.data); } catch (_) { return; }
    if (app.view) renderHeader(app.view.state, app.sessions.find((s) => s.id === app.view.id));
  });
  es.addEventListener('resync', (ev) => {
    seen(ev);
    refreshSessions();
    if (app.view) loadSnapshot();
  });
  es.addEventListener('reconnect', (ev) => {
    seen(ev);
    es.planned = true;
  });
}

function onEvent(ev) {
  let d;
  try { d = JSON.parse(ev.data); } catch (_) { return; }
  if (d.kind === 'session_created' || d.kind === 'session_updated') scheduleSessions();
  const v = app.view;
  if (v && d.session_id === v.id) onSessionEvent(v, d);
}

// listening mirrors core.AgentStatus.Listening.
function listening(a, id) {
  return a.ready && (a.all_sessions > 0 || (a.sessions && a.sessions[id] > 0));
}

function setConn(state) {
  const c = $('conn');
  c.dataset.state = state;
  c.title = { live: 'Live', connecting: 'Connecting…', offline: 'Offline; retrying' }[state] || state;
}

// ---- composer ---------------------------------------------------------------------

async function send(ev) {
  if (ev) ev.preventDefault();
  const v = app.view;
  const input = $('input');
  const text = input.value;
  if (!v || !text.trim()) return;
  $('send').disabled = true;
  // Cleared at once, so what is typed while the request runs stays; put
  // back if the message was refused, unless something new was typed.
  input.value = '';
  autosize();
  try {
    await api('POST', '/api/sessions/' + encodeURIComponent(v.id) + '/messages', { text, client_id: clientID() });
    showBanner('');
  } catch (err) {
    if (!input.value) { input.value = text; autosize(); }
    reportError(err);
  } finally {
    $('send').disabled = !app.view || (app.view.state && app.view.state.status === 'closed');
    input.focus();
  }
}

function autosize() {
  const t = $('input');
  t.style.height = 'auto';
  t.style.height = Math.min(t.scrollHeight, 240) + 'px';
}

// ---- rename, archive ---------------------------------------------------------------

function startRename() {
  const cur = app.view && app.sessions.find((s) => s.id === app.view.id);
  const input = $('rename-input');
  input.value = (app.view.state && app.view.state.title) || (cur && cur.title) || '';
  $('archive-confirm').hidden = true;
  $('rename-form').hidden = false;
  input.focus();
  input.select();
}

async function rename(ev) {
  ev.preventDefault();
  const v = app.view;
  const title = $('rename-input').value.trim();
  if (!v) return;
  if (!title) { showBanner('A title cannot be empty.'); return; }
  try {
    const s = await api('POST', '/api/sessions/' + encodeURIComponent(v.id) + '/title', { title });
    upsertSession(s);
    if (v.state) v.state = Object.assign({}, v.state, { title: s.title });
    $('rename-form').hidden = true;
    showBanner('');
    renderSessions();
  } catch (err) {
    reportError(err);
  }
}

async function archive() {
  const v = app.view;
  if (!v) return;
  $('archive-yes').disabled = true;
  try {
    const s = await api('POST', '/api/sessions/' + encodeURIComponent(v.id) + '/archive');
    upsertSession(s);
    $('archive-confirm').hidden = true;
    showBanner('');
    select('');
    scheduleSessions();
  } catch (err) {
    reportError(err);
  } finally {
    $('archive-yes').disabled = false;
  }
}

function upsertSession(s) {
  const i = app.sessions.findIndex((x) => x.id === s.id);
  if (i >= 0) app.sessions[i] = s; else app.sessions.push(s);
}

// ---- the drawer (narrow screens) ----------------------------------------------------

function setDrawer(open) {
  open = open && NARROW.matches;
  document.body.classList.toggle('drawer-open', open);
  $('backdrop').hidden = !open;
  $('menu').setAttribute('aria-expanded', String(open));
}

function init() {
  initToken();
  $('token-form').addEventListener('submit', submitToken);
  $('menu').addEventListener('click', () => setDrawer(!document.body.classList.contains('drawer-open')));
  $('backdrop').addEventListener('click', () => setDrawer(false));
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && document.body.classList.contains('drawer-open') && app.view) setDrawer(false);
  });
  $('sessions').addEventListener('click', (ev) => {
    if (ev.target.closest('a.session')) setDrawer(false);
  });
  NARROW.addEventListener('change', () => {
    setDrawer(!app.view);
    renderHeader(app.view && app.view.state, app.view && app.sessions.find((s) => s.id === app.view.id));
  });
  $('show-archived').checked = app.showArchived;
  $('show-archived').addEventListener('change', (ev) => {
    app.showArchived = ev.target.checked;
    localStorage.setItem(ARCHIVED_KEY, app.showArchived ? '1' : '0');
    renderSessions();
  });
  $('rename').addEventListener('click', startRename);
  $('rename-form').addEventListener('submit', rename);
  $('rename-cancel').addEventListener('click', () => { $('rename-form').hidden = true; });
  $('rename-input').addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') $('rename-form').hidden = true;
  });
  $('archive').addEventListener('click', () => {
    $('rename-form').hidden = true;
    $('archive-confirm').hidden = false;
    $('archive-yes').focus();
  });
  $('archive-yes').addEventListener('click', archive);
  $('archive-no').addEventListener('click', () => { $('archive-confirm').hidden = true; });
  $('new-session').addEventListener('submit', createSession);
  $('composer').addEventListener('submit', send);
  $('input').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) send(ev);
  });
  $('input').addEventListener('input', autosize);
  window.addEventListener('hashchange', () => {
    if (initToken()) {
      app.needToken = false;
      $('token-box').hidden = true;
      connect();
    }
    select(selectedFromHash());
  });
  connect();
  const id = selectedFromHash();
  if (id) select(id); else { renderAll(); setDrawer(true); }
}

init();
