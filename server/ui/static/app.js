// The hrns sessions page. It calls the public /api/v2 endpoints with
// relative URLs (so that it works behind a path prefix) and builds every
// element with textContent: nothing from a session is ever parsed as HTML.
'use strict';

(() => {
  const page = new URL('.', location.href);       // PREFIX/ui/
  const API = new URL('../api/v2/', page);          // PREFIX/api/v2/
  const TERMINAL = new Set(['completed', 'failed', 'timed_out', 'interrupted']);
  const STATES = ['queued', 'pending', 'running', 'paused', 'idle', 'awaiting_tool_results', 'completed', 'failed', 'timed_out', 'interrupted'];
  const main = document.getElementById('main');
  let csrf = '';
  let authRequired = false;
  let cleanup = [];  // what the current view stops when left

  // visible makes control, bidirectional and zero-width characters
  // visible as \uXXXX escapes (newlines and tabs stay), like the
  // terminal's safetext.
  const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]/g;
  function visible(s) {
    return String(s).replace(UNSAFE, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
  }

  // el builds an element: props are class, text (set as textContent)
  // and a few attributes; children are elements or strings (text nodes).
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = visible(v);
      else if (k === 'on') for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      e.append(typeof c === 'string' ? document.createTextNode(visible(c)) : c);
    }
    return e;
  }

  function toast(msg) {
    const t = document.getElementById('toast');
    t.textContent = visible(msg);
    t.classList.add('show');
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => t.classList.remove('show'), 4000);
  }

  function detail(body, status) {
    if (body && typeof body.detail === 'string') return body.detail;
    if (body && Array.isArray(body.detail)) return body.detail.map((d) => (d.loc || []).join('.') + ': ' + d.msg).join('; ');
    return 'HTTP ' + status;
  }

  // api calls the API with the session cookie and the CSRF header.
  async function api(method, path, body) {
    const headers = {};
    if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
    const init = { method, headers, credentials: 'same-origin' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(new URL(path, API), init);
    if (r.status === 401) { showLogin('Your session has ended: log in again.'); throw new Error('Not authenticated'); }
    const text = await r.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!r.ok) throw new Error(detail(data, r.status));
    return data;
  }

  function pretty(v) {
    if (typeof v === 'string') return v;
    try { return JSON.stringify(v, null, 2); } catch { return String(v); }
  }

  function age(iso) {
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (s < 60) return Math.floor(s) + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm';
    if (s < 86400) return Math.floor(s / 3600) + 'h';
    return Math.floor(s / 86400) + 'd';
  }

  function agentName(v) {
    const a = v && v.request && v.request.agent;
    if (typeof a === 'string') return a;
    if (a && typeof a.name === 'string') return a.name;
    return '';
  }

  function usage(status) {
    let input = 0, output = 0, reasoning = 0;
    for (const u of (status && status.usage_per_model) || []) {
      input += u.input_tokens || 0; output += u.output_tokens || 0; reasoning += u.reasoning_tokens || 0;
    }
    let s = input + ' in / ' + output + ' out';
    if (reasoning) s += ' / ' + reasoning + ' reasoning';
    return s + ' tokens';
  }

  // money shows a cost in dollars as the terminal does.
  function money(c) {
    if (!(c > 0)) return '$0';
    if (c < 0.0001) return '<$0.0001';
    if (c < 0.01) return '$' + c.toFixed(4);
    return '$' + c.toFixed(2);
  }

  // cost describes the cost of a session's metrics: null totals mean a
  // model without a price, named so that the operator can price it.
  function cost(metrics) {
    if (!metrics) return '';
    if (typeof metrics.total_cost === 'number') return money(metrics.total_cost);
    const unpriced = (metrics.cost_per_model || []).filter((m) => typeof m.total_cost !== 'number').map((m) => m.name);
    return 'cost unknown (' + (unpriced.join(', ') || 'a model') + ' not priced)';
  }

  // summary is a session's steps, tokens and cost, from its changes.
  function summary(c) {
    const m = (c && c.metrics) || {};
    const steps = m.steps || 0;
    return steps + (steps === 1 ? ' step · ' : ' steps · ') + usage({ usage_per_model: m.cost_per_model }) + ' · ' + cost(m);
  }

  // metricsOf reads a session's status and metrics, without events.
  function metricsOf(id) {
    return api('GET', 'sessions/' + encodeURIComponent(id) + '/changes?include_events=false');
  }

  function stateBadge(st) {
    return el('span', { class: 'state ' + (STATES.includes(st) ? st : ''), text: st || '?', 'data-state': st });
  }

  function leave() {
    for (const f of cleanup) f();
    cleanup = [];
  }

  // --- login ---

  function showLogin(msg) {
    leave();
    document.getElementById('logout').hidden = true;
    const input = el('input', { type: 'password', name: 'key', id: 'key', autocomplete: 'current-password', placeholder: 'API key', required: true });
    const err = el('p', { class: 'error', id: 'login-error', text: msg || '' });
    const form = el('form', { class: 'card login', id: 'login', method: 'post' },
      el('h1', { text: 'Log in' }),
      el('p', { class: 'muted', text: 'Enter an API key of this server. The page keeps a session cookie, not the key.' }),
      input, err, el('button', { type: 'submit', class: 'primary', text: 'Log in' }));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      try {
        const r = await fetch(new URL('login', page), {
          method: 'POST', credentials: 'same-origin',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ key: input.value }),
        });
        const data = await r.json().catch(() => null);
        if (!r.ok) { err.textContent = visible(detail(data, r.status)); return; }
        csrf = data.csrf || '';
        input.value = '';
        route();
      } catch (e) { err.textContent = visible(e.message); }
    });
    main.replaceChildren(form);
    input.focus();
  }

  async function logout() {
    await fetch(new URL('logout', page), { method: 'POST', credentials: 'same-origin', headers: { 'X-CSRF-Token': csrf } });
    csrf = '';
    showLogin('Logged out.');
  }

  // --- the session list ---

  function showList() {
    const params = new URLSearchParams(location.hash.split('?')[1] || '');
    const state = el('select', { id: 'f-state', 'aria-label': 'State' }, el('option', { value: '', text: 'any state' }),
      ...STATES.map((s) => el('option', { value: s, text: s })));
    state.value = params.get('status') || '';
    const agent = el('input', { id: 'f-agent', type: 'search', placeholder: 'agent', list: 'agent-names', autocomplete: 'off', value: params.get('agent') || '' });
    const names = el('datalist', { id: 'agent-names' });
    const search = el('input', { id: 'f-search', type: 'search', placeholder: 'search text', value: params.get('search') || '' });
    const body = el('tbody', { id: 'sessions' });
    const info = el('p', { class: 'muted', id: 'list-info' });
    const agentsBody = el('tbody', { id: 'agents' });
    const agentsSummary = el('summary', { text: 'Registered agents' });
    const agents = el('details', { class: 'agents card', id: 'agents-panel' }, agentsSummary,
      el('table', { class: 'sessions agents-table' },
        el('thead', {}, el('tr', {}, ...['Agent', 'Description', 'Model', ''].map((h) => el('th', { text: h })))),
        agentsBody));
    main.replaceChildren(
      el('div', { class: 'filters' }, state, agent, names, search),
      el('table', { class: 'sessions' },
        el('thead', {}, el('tr', {}, ...['Session', 'State', 'Agent', 'Age', 'Usage · cost'].map((h) => el('th', { text: h })))),
        body),
      info, agents);
    // The registered agents: the filter's suggestions, and a list whose
    // names filter the sessions.
    async function loadAgents() {
      try {
        const res = await api('GET', 'agents?size=100');
        const items = (res.items || []).filter((a) => a && typeof a.name === 'string');
        names.replaceChildren(...items.map((a) => el('option', { value: a.name })));
        agentsSummary.textContent = visible(res.total + ' registered agent' + (res.total === 1 ? '' : 's') + (res.total > items.length ? ', the first ' + items.length + ' shown' : ''));
        agentsBody.replaceChildren(...items.map((a) => el('tr', { 'data-agent': a.name },
          el('td', {}, el('a', { href: '#/', class: 'agent-filter', text: a.name, on: { click: (ev) => { ev.preventDefault(); agent.value = a.name; refresh(); } } })),
          el('td', { text: a.description || '' }),
          a.model ? el('td', { text: a.model }) : el('td', { class: 'muted', text: 'default model' }),
          el('td', { class: 'muted', text: a.read_only ? 'server' : 'registered' }))));
      } catch (e) { agentsSummary.textContent = visible('Registered agents: ' + e.message); }
    }
    let timer = 0, gen = 0;
    // The list items carry no usage: it comes from each session's
    // metrics, kept once the session has ended.
    const usageCache = new Map(), lastUsage = new Map();
    async function fillUsage(v, td, my) {
      try {
        const c = await metricsOf(v.id);
        const text = summary(c);
        if (TERMINAL.has(c.status)) {
          if (usageCache.size > 500) usageCache.clear();
          usageCache.set(v.id, text);
        }
        if (lastUsage.size > 500) lastUsage.clear();
        lastUsage.set(v.id, text);
        if (my === gen) td.textContent = visible(text);
      } catch { /* shown empty */ }
    }
    async function refresh() {
      clearTimeout(timer);
      const my = ++gen;
      const q = new URLSearchParams({ size: '50' });
      if (state.value) q.set('status', state.value);
      if (agent.value.trim()) q.set('agent', agent.value.trim());
      if (search.value.trim()) q.set('search', search.value.trim());
      try {
        const res = await api('GET', 'sessions?' + q);
        if (my !== gen) return;
        const items = res.items || [];
        body.replaceChildren(...items.map((v) => {
          const use = el('td', { class: 'usage', text: usageCache.get(v.id) || lastUsage.get(v.id) || '' });
          if (!usageCache.has(v.id)) fillUsage(v, use, my);
          return el('tr', { 'data-id': v.id },
            el('td', { class: 'id' }, el('a', { href: '#/s/' + encodeURIComponent(v.id), text: v.id }),
              v.first_message && v.first_message.message ? el('div', { class: 'muted first', text: String(v.first_message.message).slice(0, 160) }) : null),
            el('td', {}, stateBadge(v.status)),
            el('td', { text: v.agent || '' }),
            el('td', { text: age(v.created_at), title: v.created_at }),
            use);
        }));
        info.textContent = visible((res.total || 0) + ' session(s)' + (res.total > (res.items || []).length ? ', the newest ' + res.items.length + ' shown' : '') + '; updated live');
      } catch (e) {
        if (my === gen) info.textContent = visible('Could not list the sessions: ' + e.message);
      }
      if (my === gen) timer = setTimeout(refresh, 3000);
    }
    let debounce = 0;
    const changed = () => { clearTimeout(debounce); debounce = setTimeout(refresh, 250); };
    state.addEventListener('change', changed);
    agent.addEventListener('input', changed);
    search.addEventListener('input', changed);
    cleanup.push(() => { gen++; clearTimeout(timer); clearTimeout(debounce); });
    loadAgents();
    refresh();
  }

  // --- one session ---

  function kindOf(e) {
    return e.data && typeof e.data.kind === 'string' ? e.data.kind : '';
  }

  function block(label, cls, ...children) {
    return el('div', { class: 'ev ' + cls }, el('div', { class: 'label', text: label }), ...children);
  }

  function toolCall(req) {
    return el('div', { class: 'call' },
      el('strong', { text: req.tool_name || '?' }), ' ', el('span', { class: 'muted', text: req.id || '' }),
      el('pre', { class: 'args', text: pretty(req.args === undefined ? {} : req.args) }));
  }

  // --- previews of calls waiting for approval, as the terminal shows them ---

  // lines cuts text into lines; a final newline does not start a line.
  function lines(text) {
    if (text === '') return [];
    return text.replace(/\n$/, '').split('\n');
  }

  // MAX_DIFF_CELLS bounds the work of the line diff: past it (lines of
  // the old text times lines of the new, once the common head and tail
  // are set aside) the changed middle shows as removed then added.
  const MAX_DIFF_CELLS = 1 << 20;

  // diff returns the lines of a diff of a to b (arrays of lines) with
  // three lines of context around each change: {op, old, new, text},
  // op ' ', '-', '+', or '~' for a gap between hunks. It is the
  // terminal's (internal/tui/diff.go).
  function diff(a, b) {
    const all = [];
    let p = 0;
    while (p < a.length && p < b.length && a[p] === b[p]) { all.push({ op: ' ', old: p + 1, new: p + 1, text: a[p] }); p++; }
    let s = 0;
    while (s < a.length - p && s < b.length - p && a[a.length - 1 - s] === b[b.length - 1 - s]) s++;
    const am = a.slice(p, a.length - s), bm = b.slice(p, b.length - s);
    let oi = p + 1, ni = p + 1;
    const emit = (op, text) => {
      const l = { op, old: 0, new: 0, text };
      if (op !== '+') l.old = oi++;
      if (op !== '-') l.new = ni++;
      all.push(l);
    };
    if (am.length * bm.length > MAX_DIFF_CELLS) {
      am.forEach((t) => emit('-', t));
      bm.forEach((t) => emit('+', t));
    } else {
      const w = bm.length + 1;
      const lcs = new Int32Array((am.length + 1) * w);
      for (let i = am.length - 1; i >= 0; i--) {
        for (let j = bm.length - 1; j >= 0; j--) {
          lcs[i * w + j] = am[i] === bm[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
        }
      }
      let i = 0, j = 0;
      while (i < am.length || j < bm.length) {
        if (i < am.length && j < bm.length && am[i] === bm[j]) { emit(' ', am[i]); i++; j++; }
        else if (i < am.length && (j === bm.length || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) { emit('-', am[i]); i++; }
        else { emit('+', bm[j]); j++; }
      }
    }
    for (let k = a.length - s; k < a.length; k++) emit(' ', a[k]);
    const near = new Array(all.length).fill(false);
    all.forEach((l, i) => {
      if (l.op === ' ') return;
      for (let k = Math.max(0, i - 3); k <= Math.min(all.length - 1, i + 3); k++) near[k] = true;
    });
    const out = [];
    let gap = false;
    all.forEach((l, i) => {
      if (!near[i]) { gap = true; return; }
      if (gap && out.length) out.push({ op: '~' });
      gap = false;
      out.push(l);
    });
    return out;
  }

  // diffBlock shows a diff of old to new text with line numbers, every
  // line's text escaped like the rest of the page.
  function diffBlock(oldText, newText) {
    const ls = diff(lines(oldText), lines(newText));
    if (!ls.length) return el('p', { class: 'muted', text: '(no change)' });
    const num = (n) => (n ? String(n).padStart(4) : '    ');
    const pre = el('pre', { class: 'diff' });
    for (const l of ls) {
      if (l.op === '~') { pre.append(el('span', { class: 'gap', text: '   ⋮      ⋮' })); continue; }
      const cls = l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'ctx';
      pre.append(el('span', { class: cls, text: num(l.old) + ' ' + num(l.new) + ' ' + (l.op === ' ' ? ' ' : l.op) + ' ' + l.text }));
    }
    const out = [pre];
    if (newText !== '' && !newText.endsWith('\n')) out.push(el('p', { class: 'muted', text: '(no newline at the end)' }));
    return el('div', {}, ...out);
  }

  // WS_RUN is a run of spaces and tabs long enough to hide what follows
  // it off the line: shown as a marker.
  const WS_RUN = /[ \t]{8,}/g;

  // spaced returns the nodes of a line of a command: its text, each run of
  // eight or more spaces and tabs as a marker saying how many.
  function spaced(line) {
    const out = [];
    let at = 0;
    for (const m of line.matchAll(WS_RUN)) {
      out.push(line.slice(at, m.index));
      const kinds = [/ /.test(m[0]) && 'spaces', /\t/.test(m[0]) && 'tabs'].filter(Boolean).join(' and ');
      out.push(el('span', { class: 'ws', text: '[' + m[0].length + ' ' + kinds + ']' }));
      at = m.index + m[0].length;
    }
    out.push(line.slice(at));
    return out.filter((n) => n !== '');
  }

  // commandBlock shows a command waiting for approval so that every line
  // of it is seen, as the terminal shows it: one line as "$ command";
  // more with a note of how many, line numbers, and each run of blank (or
  // whitespace-only) lines as one marker line saying how many. Long runs
  // of spaces and tabs inside a line show as markers too. The block is
  // never cut or scrolled (an approval card grows to fit it), so Approve
  // comes after its last line.
  function commandBlock(cmd) {
    const ls = cmd.split('\n');
    if (ls.length === 1) return [el('pre', { class: 'command' }, '$ ', ...spaced(cmd))];
    const num = (n) => String(n).padStart(4);
    const pre = el('pre', { class: 'command numbered' });
    let run = 0, blanks = 0;
    for (let i = 0; i <= ls.length; i++) {
      if (i < ls.length && /^[ \t]*$/.test(ls[i])) { run++; blanks++; continue; }
      if (run) {
        const from = i - run + 1;
        pre.append(el('span', { class: 'blank', text: run === 1
          ? num(from) + '  (blank line)'
          : num(from) + '–' + i + '  (' + run + ' blank lines)' }));
        run = 0;
      }
      if (i < ls.length) pre.append(el('span', { class: 'line' }, num(i + 1) + '  ', ...spaced(ls[i])));
    }
    const note = '(' + ls.length + ' lines' + (blanks ? ', ' + blanks + ' of them blank' : '') + ': every line is shown)';
    return [el('p', { class: 'muted note', text: note }), pre];
  }

  // preview shows a call waiting for approval as the terminal does: the
  // command of run_command, a diff for write_file and edit_file, then
  // every other argument. The page sees only the API, not the files, so
  // write_file shows its whole new content and edit_file the
  // replacement (old_string to new_string).
  function preview(req) {
    const name = req.tool_name || '?';
    const args = req.args;
    const head = (title) => el('div', { class: 'call' }, el('strong', { text: title }), ' ', el('span', { class: 'muted', text: req.id || '' }));
    if (!args || typeof args !== 'object' || Array.isArray(args)) {
      return el('div', { class: 'preview' }, head(name + ' wants to run'), el('pre', { class: 'args', text: 'arguments: ' + pretty(args) }));
    }
    const str = (k) => (typeof args[k] === 'string' ? args[k] : '');
    const shown = new Set();
    const parts = [];
    let title = name + ' wants to run';
    if (name === 'run_command' && typeof args.command === 'string') {
      parts.push(...commandBlock(args.command));
      shown.add('command');
    } else if (name === 'write_file' && typeof args.content === 'string') {
      title = name + ' wants to write ' + str('path');
      parts.push(el('p', { class: 'muted note', text: '(the whole new content: this page cannot see the current file)' }), diffBlock('', args.content));
      shown.add('path').add('content');
    } else if (name === 'edit_file' && typeof args.old_string === 'string' && typeof args.new_string === 'string') {
      title = name + ' wants to edit ' + str('path');
      parts.push(el('p', { class: 'muted note', text: args.replace_all === true
        ? '(every occurrence of old_string is replaced: the replacement, as this page cannot see the file)'
        : '(the replacement: old_string, which must occur once in the file, becomes new_string)' }),
      diffBlock(args.old_string, args.new_string));
      shown.add('path').add('old_string').add('new_string').add('replace_all');
    }
    const rest = Object.keys(args).filter((k) => !shown.has(k)).sort();
    if (rest.length) parts.push(el('pre', { class: 'args' }, ...rest.map((k) => k + ': ' + JSON.stringify(args[k]) + '\n')));
    return el('div', { class: 'preview', 'data-tool': name }, head(title), ...parts);
  }

  // checklist shows the plan of a todo_write call's arguments; null when
  // they hold none.
  function checklist(args) {
    const todos = args && Array.isArray(args.todos) ? args.todos : null;
    if (!todos) return null;
    const marks = { completed: '☑', in_progress: '▶', pending: '☐' };
    return el('ul', { class: 'todo' }, ...todos.slice(0, 100).map((t) => {
      const status = t && typeof t.status === 'string' && marks[t.status] ? t.status : 'pending';
      return el('li', { class: status, 'data-status': status },
        el('span', { class: 'mark', 'aria-hidden': 'true', text: marks[status] }), ' ',
        el('span', { text: t && typeof t.content === 'string' ? t.content : pretty(t) }),
        status === 'in_progress' ? el('span', { class: 'muted', text: ' (in progress)' }) : null);
    }));
  }

  const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
  function image(img, alt) {
    if (!img || img.type !== 'base64' || !IMAGE_TYPES.has(img.media_type) || typeof img.source !== 'string' || !/^[A-Za-z0-9+/=\s]*$/.test(img.source)) {
      return el('p', { class: 'muted', text: '(an image that cannot be shown)' });
    }
    const i = el('img', { alt: alt || 'screenshot' });
    i.src = 'data:' + img.media_type + ';base64,' + img.source.replace(/\s/g, '');
    return i;
  }

  // renderEvent returns the element of one event of the trajectory.
  function renderEvent(e) {
    const d = e.data || {};
    let node;
    switch (e.type === 'AgentEvent' ? kindOf(e) : e.type) {
      case 'message_event': {
        const parts = Array.isArray(d.content) ? d.content : [d.content];
        node = block('message' + (d.caller_id ? ' from ' + d.caller_id : ''), 'message_event', ...parts.map((p) => {
          if (typeof p === 'string') return el('div', { class: 'text', text: p });
          if (p && typeof p.text === 'string') return el('div', { class: 'text', text: p.text });
          return el('pre', { text: pretty(p) });
        }));
        break;
      }
      case 'policy_event':
        node = block('model', 'policy_event',
          d.reasoning_content ? el('details', { class: 'thinking' }, el('summary', { text: 'thinking' }), el('div', { class: 'text', text: d.reasoning_content })) : null,
          d.content ? el('div', { class: 'text', text: d.content }) : null,
          ...(d.tool_reqs || []).map(toolCall),
          ...(d.validation_errors || []).map((v) => el('p', { class: 'error', text: v })));
        break;
      case 'tool_result': {
        const plan = d.tool_req && d.tool_req.tool_name === 'todo_write' ? checklist(d.tool_req.args) : null;
        node = block('result of ' + ((d.tool_req && d.tool_req.tool_name) || '?'), 'tool_result',
          plan, el('pre', { class: 'result', text: pretty(d.result) }));
        break;
      }
      case 'error_event':
        node = block('error' + (d.origin ? ' (' + d.origin + ')' : '') + (d.tool_req ? ' in ' + d.tool_req.tool_name : ''), 'error_event',
          el('pre', { class: 'result', text: d.error || '' }));
        break;
      case 'answer_event':
        node = block('answer' + (d.outcome ? ' (' + d.outcome + ')' : ''), 'answer_event', el('div', { class: 'text answer', text: pretty(d.answer) }));
        break;
      case 'observation_event':
        node = block(d.type === 'web' ? 'browser screenshot' : 'image' + (d.type ? ' (' + d.type + ')' : ''), 'observation_event', image(d.image, d.type === 'web' ? 'browser screenshot' : 'image from ' + ((d.tool_req && d.tool_req.tool_name) || 'a tool')));
        break;
      case 'flow_event':
        node = el('div', { class: 'ev meta flow_event', text: d.flow + (d.tool_req ? ' ' + d.tool_req.tool_name + ' ' + (d.tool_req.id || '') : '') });
        break;
      case 'AgentErrorEvent':
        node = block('agent error', 'AgentErrorEvent', el('pre', { text: pretty(d) }));
        break;
      case 'MetricsUpdateEvent':
        node = el('div', { class: 'ev meta MetricsUpdateEvent', text: 'so far: ' + summary(d) });
        break;
      case 'ActiveStateChangeEvent':
        node = el('div', { class: 'ev meta ActiveStateChangeEvent', text: 'state: ' + (d.state || '') });
        break;
      case 'AgentRunStatusChangeEvent':
        node = el('div', { class: 'ev meta AgentRunStatusChangeEvent', text: 'status: ' + (d.status || '') });
        break;
      case 'AttachmentEvent':
        node = el('div', { class: 'ev meta AttachmentEvent', text: 'file ' + (d.origin === 'agent' ? 'from the agent' : 'attached') + ': ' + (d.path || d.name || '?') + ' (' + (d.media_type || '?') + ', ' + (d.size_bytes || 0) + ' bytes)' });
        break;
      default:
        node = el('div', { class: 'ev meta ' + (e.type || ''), text: (e.type || '?') + (Object.keys(d).length ? ' ' + JSON.stringify(d) : '') });
    }
    node.dataset.index = String(e.index);
    node.dataset.type = e.type === 'AgentEvent' ? kindOf(e) : e.type;
    return node;
  }

  // trajectoryView is a session's trajectory as the session page and the
  // shared view both show it: the plan, the latest answer and the events,
  // each event once and in the order of the log. onActive receives the
  // data of each ActiveStateChangeEvent (the calls waiting), onMetrics
  // that of each MetricsUpdateEvent.
  function trajectoryView(onActive, onMetrics) {
    const planBox = el('div', { id: 'plan' });
    const answerBox = el('div', { id: 'answer' });
    const traj = el('div', { id: 'events' });
    let last = -1;
    function add(e) {
      if (!e || typeof e.index !== 'number' || e.index <= last) return;
      last = e.index;
      traj.append(renderEvent(e));
      const d = e.data || {};
      if (e.type === 'ActiveStateChangeEvent') onActive(d);
      if (e.type === 'MetricsUpdateEvent') onMetrics(d);
      if (e.type === 'AgentEvent' && kindOf(e) === 'tool_result' && d.tool_req && d.tool_req.tool_name === 'todo_write') {
        const plan = checklist(d.tool_req.args);
        if (plan) planBox.replaceChildren(el('div', { class: 'card' }, el('div', { class: 'label', text: 'plan' }), plan));
      }
      if (e.type === 'AgentEvent' && kindOf(e) === 'answer_event') {
        answerBox.replaceChildren(el('div', { class: 'card' }, el('div', { class: 'label', text: 'latest answer' }), el('div', { class: 'text', text: pretty(d.answer) })));
      }
    }
    return { planBox, answerBox, traj, add, last: () => last };
  }

  // pendingCards shows the calls an ActiveStateChangeEvent says are
  // waiting for approval or for a client's result, but those in skip.
  // steer (the session page's) returns the controls that answer a call;
  // without it the cards are read-only.
  function pendingCards(as, skip, steer) {
    const cards = [];
    for (const req of (as && as.pending_approvals) || []) {
      if (!req || skip.has(req.id)) continue;
      const card = el('div', { class: 'card approval', 'data-call': req.id },
        el('div', { class: 'label', text: 'approval needed' }), preview(req));
      if (steer) card.append(...steer.approval(req, card));
      cards.push(card);
    }
    for (const req of (as && as.pending_tool_calls) || []) {
      if (!req || skip.has(req.id)) continue;
      const card = el('div', { class: 'card client-tool', 'data-call': req.id },
        el('div', { class: 'label', text: 'client tool call waiting for a result' }), toolCall(req));
      if (steer) card.append(...steer.toolCall(req, card));
      cards.push(card);
    }
    return cards;
  }

  function showSession(id) {
    const head = el('div', { class: 'head' }, el('a', { href: '#/', text: '← sessions' }), el('h1', { text: id }));
    const badge = el('span', { id: 'status' });
    const usageLine = el('span', { class: 'usage', id: 'usage' });
    const meta = el('div', { class: 'head' }, badge, usageLine);
    const act = (label, path, method, cls) => el('button', {
      type: 'button', class: cls, id: 'btn-' + label.toLowerCase().replace(/\s+/g, '-'), text: label,
      on: { click: async (ev) => {
        const b = ev.currentTarget; b.disabled = true;
        try { await api(method || 'POST', 'sessions/' + encodeURIComponent(id) + path); toast(label + ': sent'); connect(); poll(); } catch (e) { toast(label + ' failed: ' + e.message); }
        b.disabled = false;
      } },
    });
    const share = el('button', { type: 'button', id: 'btn-share', text: 'Share', on: { click: async () => {
      try {
        const r = await api('POST', 'sessions/' + encodeURIComponent(id) + '/share');
        const token = String(r.share_url || '').split('/').pop();
        const link = new URL('#/shared/' + encodeURIComponent(token), page).href;
        shareOut.replaceChildren(el('span', { class: 'muted', text: 'read-only link: ' }), el('a', { href: link, text: link }));
      } catch (e) { toast('Share failed: ' + e.message); }
    } } });
    const shareOut = el('div', { id: 'share' });
    const controls = el('div', { class: 'controls' },
      act('Pause', '/pause'), act('Resume', '/resume'), act('Force answer', '/force_answer'),
      act('Cancel', '', 'DELETE', 'danger'), share);
    const msg = el('textarea', { id: 'message', placeholder: 'Message to the agent', rows: 2 });
    const send = el('form', { class: 'send', id: 'send' }, msg, el('button', { type: 'submit', class: 'primary', text: 'Send' }));
    send.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (!msg.value.trim()) return;
      try {
        await api('POST', 'sessions/' + encodeURIComponent(id) + '/messages', { type: 'user_message', message: msg.value });
        msg.value = '';
        connect();
        poll();
      } catch (e) { toast('Sending failed: ' + e.message); }
    });
    const pending = el('div', { class: 'pending', id: 'pending' });
    const tv = trajectoryView(renderPending, () => {});
    const streamInfo = el('p', { class: 'muted', id: 'stream-info', text: 'connecting…' });
    main.replaceChildren(head, meta, controls, shareOut, send, pending, tv.planBox, tv.answerBox,
      el('div', { class: 'traj' }, el('h2', { text: 'Trajectory' }), tv.traj, streamInfo));

    let stopped = false, timer = 0;
    const decided = new Set();

    async function poll() {
      clearTimeout(timer);
      try {
        const [v, c] = await Promise.all([api('GET', 'sessions/' + encodeURIComponent(id)), metricsOf(id)]);
        if (stopped) return;
        const st = v.status && v.status.status;
        badge.replaceChildren(stateBadge(st));
        usageLine.textContent = visible((agentName(v) ? agentName(v) + ' · ' : '') + summary(c));
        if (TERMINAL.has(st)) renderPending(null);
        else connect();
      } catch (e) {
        if (!stopped) badge.textContent = visible('error: ' + e.message);
      }
      if (!stopped) timer = setTimeout(poll, 2000);
    }

    // steer answers the calls waiting, from the page.
    const steer = {
      approval(req, card) {
        const reason = el('input', { type: 'text', placeholder: 'reason (optional)', class: 'reason' });
        const decide = (approved) => async () => {
          try {
            await api('POST', 'sessions/' + encodeURIComponent(id) + '/approvals', { id: req.id, approved, reason: reason.value || undefined });
            decided.add(req.id); card.remove();
          } catch (e) { toast('Decision failed: ' + e.message); }
        };
        return [el('div', { class: 'controls' },
          el('button', { type: 'button', class: 'primary approve', text: 'Approve', on: { click: decide(true) } }),
          el('button', { type: 'button', class: 'danger reject', text: 'Reject', on: { click: decide(false) } }), reason)];
      },
      toolCall(req, card) {
        const result = el('textarea', { class: 'tool-result', placeholder: 'result (text, or JSON)' });
        const answer = (isError) => async () => {
          let value = result.value;
          try { value = JSON.parse(value); } catch { /* text */ }
          const body = isError
            ? { kind: 'error_event', error: result.value, origin: 'custom_tools', tool_req: req }
            : { kind: 'tool_result', tool_req: req, result: value };
          try {
            await api('POST', 'sessions/' + encodeURIComponent(id) + '/tool_results', body);
            decided.add(req.id); card.remove();
          } catch (e) { toast('Answer failed: ' + e.message); }
        };
        return [result, el('div', { class: 'controls' },
          el('button', { type: 'button', class: 'primary send-result', text: 'Send result', on: { click: answer(false) } }),
          el('button', { type: 'button', class: 'danger send-error', text: 'Send as error', on: { click: answer(true) } }))];
      },
    };

    function renderPending(as) {
      const cards = pendingCards(as, decided, steer);
      pending.replaceChildren(...(cards.length ? [el('h2', { text: 'Waiting for you' }), ...cards] : []));
    }

    // The stream ends with the session; a message or a resume that
    // restarts it is seen by poll, which opens the stream again after the
    // last event shown.
    let es = null;
    function connect() {
      if (es || stopped) return;
      const url = new URL('sessions/' + encodeURIComponent(id) + '/events', API);
      if (tv.last() >= 0) url.searchParams.set('from_index', String(tv.last() + 1));
      const src = new EventSource(url);
      es = src;
      const onEvent = (m) => {
        try { tv.add(JSON.parse(m.data)); } catch { /* a malformed event is skipped */ }
        streamInfo.textContent = 'live';
      };
      for (const t of ['AgentEvent', 'AgentStartedEvent', 'AgentCompletionEvent', 'AgentErrorEvent', 'AgentRunStatusChangeEvent', 'ActiveStateChangeEvent', 'MetricsUpdateEvent', 'AttachmentEvent', 'message']) {
        src.addEventListener(t, onEvent);
      }
      src.addEventListener('end', () => {
        src.close();
        if (es === src) es = null;
        streamInfo.textContent = 'the session has ended; every event is shown';
      });
      src.addEventListener('error', (m) => {
        if (m.data) { streamInfo.textContent = visible('stream error: ' + m.data); return; }
        if (src.readyState === EventSource.CLOSED) {
          if (es === src) es = null;
          streamInfo.textContent = 'the stream closed';
        } else streamInfo.textContent = 'reconnecting…';
      });
    }
    cleanup.push(() => { stopped = true; clearTimeout(timer); if (es) es.close(); });
    connect();
    poll();
  }

  // --- a shared session, read-only and without a key ---

  // The shared view polls GET shared/TOKEN/events (the stream needs a
  // key): SHARED_PAGE events a request (the API's largest page), at most
  // SHARED_PAGES a round; a round that brings nothing new doubles the
  // wait before the next, from SHARED_WAIT_MIN to SHARED_WAIT_MAX, and a
  // failed one from SHARED_WAIT_ERR to SHARED_WAIT_ERR_MAX. It stops once
  // the session has ended and every event is shown.
  const SHARED_PAGE = 200;
  const SHARED_PAGES = 25;
  const SHARED_WAIT_MIN = 1000, SHARED_WAIT_MAX = 15000;
  const SHARED_WAIT_ERR = 2000, SHARED_WAIT_ERR_MAX = 60000;

  class Revoked extends Error {}

  // sharedGet reads a shared endpoint with no cookie and no key: the
  // token in the path is the only credential.
  async function sharedGet(path) {
    const r = await fetch(new URL(path, API), { credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer' });
    const text = await r.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (r.status === 404) throw new Revoked('not found');
    if (!r.ok) throw new Error(detail(data, r.status));
    if (!data || typeof data !== 'object') throw new Error('the server sent no JSON');
    return data;
  }

  // showRevoked says that a share link opens nothing.
  function showRevoked() {
    main.replaceChildren(el('div', { class: 'card', id: 'shared-revoked' },
      el('h1', { text: 'This link no longer works' }),
      el('p', { text: 'The session it shared has been unshared by its owner, or the link is wrong. Ask the owner for a new link.' })));
  }

  function showShared(token) {
    document.getElementById('logout').hidden = true;
    if (!token) { showRevoked(); return; }
    const base = 'shared/' + encodeURIComponent(token);
    const title = el('h1', { text: 'shared session' });
    const badge = el('span', { id: 'status' });
    const info = el('p', { class: 'muted', id: 'shared-info', text: 'A shared session: read-only.' });
    const usageLine = el('p', { class: 'usage', id: 'usage' });
    const request = el('pre', { id: 'shared-request' });
    const pending = el('div', { class: 'pending', id: 'pending' });
    let metrics = null;
    const tv = trajectoryView((as) => {
      const cards = pendingCards(as, new Set(), null);
      pending.replaceChildren(...(cards.length ? [el('h2', { text: 'Waiting for the owner' }), ...cards] : []));
    }, (d) => { metrics = d; });
    const streamInfo = el('p', { class: 'muted', id: 'stream-info', text: 'loading…' });
    main.replaceChildren(el('div', { class: 'head' }, title, badge), info, usageLine,
      el('details', { class: 'request' }, el('summary', { text: 'request' }), request),
      pending, tv.planBox, tv.answerBox,
      el('div', { class: 'traj' }, el('h2', { text: 'Trajectory' }), tv.traj, streamInfo));

    let stopped = false, timer = 0, wait = SHARED_WAIT_MIN, shown = false;
    async function round() {
      let next;
      try {
        const v = await sharedGet(base);
        if (stopped) return;
        const st = v.status && v.status.status;
        if (!shown) {
          title.textContent = visible(String(v.id || ''));
          request.textContent = visible(pretty(v.request));
          shown = true;
        }
        badge.replaceChildren(stateBadge(st));
        info.textContent = visible('A shared session: read-only.' + (agentName(v) ? ' Agent ' + agentName(v) + '.' : ''));
        let total = 0, grew = false;
        for (let n = 0; n < SHARED_PAGES; n++) {
          const count = tv.last() + 1;
          const p = await sharedGet(base + '/events?size=' + SHARED_PAGE + '&from_index=' + count);
          if (stopped) return;
          total = typeof p.total === 'number' ? p.total : 0;
          const before = tv.last();
          for (const e of Array.isArray(p.items) ? p.items : []) tv.add(e);
          if (tv.last() === before) break;
          grew = true;
          if (tv.last() + 1 >= total) break;
        }
        usageLine.textContent = visible(metrics ? summary(metrics) : usage(v.status));
        const all = tv.last() + 1 >= total;
        if (TERMINAL.has(st) && all) {
          streamInfo.textContent = 'the session has ended; every event is shown';
          return;
        }
        streamInfo.textContent = all ? 'live (checked ' + new Date().toLocaleTimeString() + ')' : 'loading…';
        wait = grew ? SHARED_WAIT_MIN : Math.min(wait * 2, SHARED_WAIT_MAX);
        next = all ? wait : 0;
      } catch (e) {
        if (stopped) return;
        if (e instanceof Revoked) {
          stopped = true;
          showRevoked();
          return;
        }
        wait = Math.min(Math.max(wait * 2, SHARED_WAIT_ERR), SHARED_WAIT_ERR_MAX);
        streamInfo.textContent = visible('cannot read the shared session (' + e.message + '); trying again in ' + Math.round(wait / 1000) + 's');
        next = wait;
      }
      if (!stopped) timer = setTimeout(round, next);
    }
    cleanup.push(() => { stopped = true; clearTimeout(timer); });
    round();
  }

  // --- routing ---

  let loggedIn = false;
  async function route() {
    leave();
    const h = location.hash.replace(/^#/, '');
    const shared = h.match(/^\/shared\/([^/?]+)$/);
    if (shared) {
      let token = '';
      try { token = decodeURIComponent(shared[1]); } catch { /* a malformed link opens nothing */ }
      showShared(token);
      return;
    }
    if (!loggedIn || !csrf && authRequired) {
      try {
        const r = await fetch(new URL('session', page), { credentials: 'same-origin' });
        const s = await r.json();
        authRequired = !!s.auth_required; loggedIn = !!s.logged_in; csrf = s.csrf || '';
      } catch (e) { main.replaceChildren(el('p', { class: 'error', text: 'Cannot reach the server: ' + e.message })); return; }
      if (!loggedIn) { showLogin(); return; }
    }
    document.getElementById('logout').hidden = !authRequired;
    const m = h.match(/^\/s\/([^/?]+)$/);
    if (m) showSession(decodeURIComponent(m[1]));
    else showList();
  }

  document.getElementById('logout').addEventListener('click', () => { loggedIn = false; logout(); });
  window.addEventListener('hashchange', route);
  const origLogin = showLogin;
  showLogin = (msg) => { loggedIn = false; origLogin(msg); };
  route();
})();
