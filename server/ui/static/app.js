// The hrns sessions page. It calls the public /api/v2 endpoints with
// relative URLs (so that it works behind a path prefix), as ui/api/v2
// when it sends its cookie, and builds every element with textContent:
// nothing from a session is ever parsed as HTML.
'use strict';

(() => {
  const page = new URL('.', location.href);       // PREFIX/ui/
  // The API, under the page's own path, where the session cookie goes
  // (it is scoped to PREFIX/ui); PUBLIC_API, the API's own path, for the
  // calls that carry no cookie (a shared session, an upload's target).
  const API = new URL('api/v2/', page);             // PREFIX/ui/api/v2/
  const PUBLIC_API = new URL('../api/v2/', page);   // PREFIX/api/v2/
  const TERMINAL = new Set(['completed', 'failed', 'timed_out', 'interrupted']);
  const STATES = ['queued', 'pending', 'running', 'paused', 'idle', 'awaiting_tool_results', 'completed', 'failed', 'timed_out', 'interrupted'];
  const main = document.getElementById('main');
  let csrf = '';
  let authRequired = false;
  let cleanup = [];  // what the current view stops when left

  // visible makes control, format (bidirectional, zero-width, tags),
  // private-use, unassigned and other invisible characters (Hangul
  // fillers, variation selectors, the blank U+2800), every space but
  // U+0020, the line and paragraph separators and lone surrogates visible
  // as \uXXXX (\UXXXXXXXX beyond the BMP) escapes; newlines and tabs
  // stay. These are the characters the terminal's safetext escapes.
  const UNSAFE = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u2800]/gu;
  function visible(s) {
    return String(s).replace(UNSAFE, (c) => {
      if (c === '\n' || c === '\t' || c === ' ') return c;
      const n = c.codePointAt(0);
      return n > 0xffff ? '\\U' + n.toString(16).padStart(8, '0') : '\\u' + n.toString(16).padStart(4, '0');
    });
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

  // --- attachments: files given with a new session or a message ---

  // Images go with the message (as data URIs, which the model sees);
  // other files are written into the session's workspace
  // (POST .../files/write_file), which the agent's file tools read, and
  // the message names them. MAX_FILES files, MAX_FILE_BYTES each and
  // MAX_IMAGE_BYTES of images at most: the API's body limit is 5 MB of
  // JSON, and base64 grows by a third.
  const MAX_FILES = 20;
  const MAX_FILE_BYTES = 3 << 20;
  const MAX_IMAGE_BYTES = 3 << 20;
  const ATTACH_IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

  function readAs(file, how) {
    return new Promise((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(r.result);
      r.onerror = () => reject(new Error('cannot read ' + file.name));
      if (how === 'url') r.readAsDataURL(file); else r.readAsArrayBuffer(file);
    });
  }

  function b64(buf) {
    const bytes = new Uint8Array(buf);
    let s = '';
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(s);
  }

  // FILE_NAME is what a file's name may be to travel as a workspace path:
  // no directory part, no control character.
  const FILE_NAME = /^[^/\\\u0000-\u001f\u007f]{1,255}$/;

  // readAttachments checks and reads the files of an <input type=file>:
  // {images: [data URI], files: [{name, content_base64}]}, or throws an
  // error that says which file and why, before anything is sent.
  async function readAttachments(list) {
    const all = Array.from(list || []);
    if (all.length > MAX_FILES) throw new Error('at most ' + MAX_FILES + ' files at once (' + all.length + ' chosen)');
    const images = [], files = [];
    let imageBytes = 0;
    const names = new Set();
    for (const f of all) {
      // The API refuses an empty image or file (422): say so before
      // anything is sent.
      if (f.size === 0) throw new Error(f.name + ' is empty: there is nothing in it to attach');
      if (ATTACH_IMAGE_TYPES.has(f.type)) {
        imageBytes += f.size;
        if (imageBytes > MAX_IMAGE_BYTES) throw new Error('the images add up to more than ' + (MAX_IMAGE_BYTES >> 20) + ' MiB');
        images.push(await readAs(f, 'url'));
        continue;
      }
      if (!FILE_NAME.test(f.name) || f.name === '.' || f.name === '..') throw new Error('a file name the workspace cannot hold: ' + JSON.stringify(f.name));
      if (names.has(f.name)) throw new Error('two files named ' + f.name);
      names.add(f.name);
      if (f.size > MAX_FILE_BYTES) throw new Error(f.name + ' is larger than ' + (MAX_FILE_BYTES >> 20) + ' MiB');
      files.push({ name: f.name, content_base64: b64(await readAs(f, 'buffer')) });
    }
    return { images, files };
  }

  // userMessage is the message of text and attachments: the files
  // written to the workspace are named at its end.
  function userMessage(text, att) {
    let m = text;
    if (att.files.length) m += '\n\n(Attached in the workspace: ' + att.files.map((f) => f.name).join(', ') + ')';
    const msg = { type: 'user_message', message: m };
    if (att.images.length) msg.images = att.images;
    return msg;
  }

  // writeFiles writes the attached files into a session's workspace.
  async function writeFiles(id, att) {
    for (const f of att.files) {
      await api('POST', 'sessions/' + encodeURIComponent(id) + '/files/write_file', { path: f.name, content_base64: f.content_base64 });
    }
  }

  // startSession creates a session of agent with a message and files,
  // and returns its id. With files, the session is created waiting for
  // its first message, the files are written, then the message is sent:
  // the agent never starts without them. A file that cannot be written
  // cancels the session, and the error says why.
  async function startSession(agent, text, list, extra) {
    const att = await readAttachments(list);
    if (!att.files.length) {
      const v = await api('POST', 'sessions', { ...extra, agent, messages: [userMessage(text, att)] });
      return v.id;
    }
    const v = await api('POST', 'sessions', { ...extra, agent });
    try {
      await writeFiles(v.id, att);
    } catch (e) {
      api('DELETE', 'sessions/' + encodeURIComponent(v.id)).catch(() => {});
      throw new Error('attaching the files: ' + e.message);
    }
    await api('POST', 'sessions/' + encodeURIComponent(v.id) + '/messages', userMessage(text, att));
    return v.id;
  }

  // newSessionForm is the form that starts a session: an agent of the
  // server or of the key, a message, files.
  function newSessionForm() {
    const agent = el('select', { id: 'new-agent', 'aria-label': 'Agent', required: true });
    const message = el('textarea', { id: 'new-message', rows: 3, placeholder: 'What should the agent do?', required: true });
    const files = el('input', { type: 'file', id: 'new-files', multiple: true, 'aria-label': 'Files' });
    // The browser profile the agent's web environment starts from, as
    // an override of the request (the agent must have one).
    const profile = el('select', { id: 'new-profile', 'aria-label': 'Browser profile' },
      el('option', { value: '', text: 'no browser profile' }), el('option', { value: 'default', text: 'the default profile' }));
    const err = el('p', { class: 'error', id: 'new-error' });
    const start = el('button', { type: 'submit', class: 'primary', id: 'new-start', text: 'Start', disabled: true });
    const form = el('form', { class: 'card new-session', id: 'new-session' },
      el('h2', { text: 'New session' }),
      el('div', { class: 'row' }, el('label', { for: 'new-agent', text: 'Agent' }), agent),
      message,
      el('div', { class: 'row' }, el('label', { for: 'new-files', text: 'Files' }), files,
        el('span', { class: 'muted small', text: 'images go to the model; other files to the session’s workspace' })),
      err, el('div', { class: 'controls' }, start,
        el('label', { for: 'new-profile', class: 'muted small', text: 'Browser profile', title: 'for an agent with a web environment' }), profile));
    api('GET', 'browser-profiles?limit=100').then((res) => {
      for (const p of (res.profiles || []).filter((x) => x && typeof x.id === 'string')) {
        profile.append(el('option', { value: p.id, text: p.name + (p.is_default ? ' (default)' : '') }));
      }
    }).catch(() => {});
    api('GET', 'agents?size=100').then((res) => {
      const items = (res.items || []).filter((a) => a && typeof a.name === 'string');
      agent.replaceChildren(...items.map((a) => el('option', { value: a.name, text: a.name + (a.read_only ? ' (server)' : '') })));
      start.disabled = !items.length;
      if (!items.length) err.textContent = 'No agent: register one under Manage, or configure one for the server.';
    }).catch((e) => { err.textContent = visible('Cannot list the agents: ' + e.message); });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      if (!message.value.trim()) { err.textContent = 'Write a message.'; return; }
      start.disabled = true;
      try {
        const chosen = profile.value;
        const extra = !chosen ? {} : { overrides: chosen === 'default'
          ? { 'agent.environments[kind=web].use_default_browser_profile': true }
          : { 'agent.environments[kind=web].browser_profile_id': chosen } };
        const id = await startSession(agent.value, message.value, files.files, extra);
        message.value = '';
        files.value = '';
        location.hash = '#/s/' + encodeURIComponent(id);
      } catch (e) {
        err.textContent = visible('Not started: ' + e.message);
      } finally { start.disabled = false; }
    });
    return form;
  }

  function stateBadge(st) {
    return el('span', { class: 'state ' + (STATES.includes(st) ? st : ''), text: words(st), title: st || '', 'data-state': st });
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
    main.replaceChildren(newSessionForm(),
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

  // --- Markdown, as elements ---

  // markdown renders Markdown (CommonMark's common part and GitHub's
  // tables and strikethrough) from untrusted text as elements built with
  // createElement and text nodes: nothing is ever parsed as HTML, so raw
  // HTML in the text shows as text. Links are kept only for http, https
  // and mailto URLs (rel="noopener noreferrer nofollow", opened in a new
  // tab); any other link, javascript: included, shows as its text and
  // its URL, inert. Images are not loaded (the CSP forbids other hosts
  // anyway): they show as links. Text past MD_MAX_CHARS shows as plain
  // text (a paragraph past MD_MAX_INLINE, without inline Markdown), and nesting stops at MD_MAX_DEPTH.
  const MD_MAX_CHARS = 100000;
  const MD_MAX_INLINE = 20000;
  const MD_MAX_DEPTH = 8;
  const SAFE_URL = /^(https?:\/\/|mailto:)[^\s\u0000-\u001f\u007f]*$/i;

  function markdown(src) {
    const box = el('div', { class: 'md' });
    src = String(src);
    if (src.length > MD_MAX_CHARS) {
      box.append(el('p', { class: 'muted', text: '(long text: shown as it is, not as Markdown)' }), el('div', { class: 'text', text: src }));
      return box;
    }
    mdBlocks(src.replace(/\r\n?/g, '\n').split('\n'), box, 0);
    return box;
  }

  const MD_FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
  const MD_HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
  const MD_HR = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
  const MD_QUOTE = /^ {0,3}> ?(.*)$/;
  const MD_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:\s+(.*))?$/;
  const MD_TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

  function mdStarts(line) {
    return MD_FENCE.test(line) || MD_HEADING.test(line) || MD_HR.test(line) || MD_QUOTE.test(line) || MD_ITEM.test(line);
  }

  function mdCells(line) {
    let s = line.trim();
    if (s.startsWith('|')) s = s.slice(1);
    if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
    return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
  }

  // mdBlocks appends the blocks of lines to parent.
  function mdBlocks(lines, parent, depth) {
    if (depth > MD_MAX_DEPTH) { parent.append(el('div', { class: 'text', text: lines.join('\n') })); return; }
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) { i++; continue; }
      let m;
      if ((m = line.match(MD_FENCE))) {
        const fence = m[1];
        const body = [];
        i++;
        while (i < lines.length && !(lines[i].trim().startsWith(fence[0].repeat(fence.length)) && /^\s*[`~]+\s*$/.test(lines[i]))) body.push(lines[i++]);
        i++;
        const code = el('code', { text: body.join('\n') });
        if (m[2]) code.dataset.lang = m[2].slice(0, 40);
        parent.append(el('pre', { class: 'code' }, code));
        continue;
      }
      if ((m = line.match(MD_HEADING))) {
        const h = el('h' + Math.min(6, m[1].length + 2), { class: 'md-h' });
        mdInline(m[2] || '', h, 0);
        parent.append(h);
        i++;
        continue;
      }
      if (MD_HR.test(line)) { parent.append(el('hr')); i++; continue; }
      if (MD_QUOTE.test(line)) {
        const inner = [];
        while (i < lines.length && (m = lines[i].match(MD_QUOTE))) { inner.push(m[1]); i++; }
        const q = el('blockquote');
        mdBlocks(inner, q, depth + 1);
        parent.append(q);
        continue;
      }
      if ((m = line.match(MD_ITEM))) {
        const ordered = /\d/.test(m[2]);
        const list = el(ordered ? 'ol' : 'ul');
        if (ordered && parseInt(m[2], 10) !== 1) list.setAttribute('start', String(parseInt(m[2], 10)));
        const indent = m[1].length;
        while (i < lines.length) {
          const im = lines[i].match(MD_ITEM);
          if (!im || im[1].length !== indent || /\d/.test(im[2]) !== ordered) break;
          const body = [im[3] || ''];
          const pad = indent + im[2].length + 1;
          i++;
          // The item's other lines: indented ones (a nested list, more
          // text), and lazy continuations of its text.
          while (i < lines.length) {
            const l = lines[i];
            if (!l.trim()) {
              if (i + 1 < lines.length && lines[i + 1].match(/^ */)[0].length > indent && lines[i + 1].trim()) { body.push(''); i++; continue; }
              break;
            }
            const lead = l.match(/^ */)[0].length;
            if (lead > indent) { body.push(l.slice(Math.min(lead, pad))); i++; continue; }
            if (mdStarts(l)) break;
            body.push(l.trim());
            i++;
          }
          const li = el('li');
          const task = body[0].match(/^\[([ xX])\]\s+(.*)$/);
          if (task) {
            li.className = 'task';
            li.append(el('span', { class: 'mark', 'aria-hidden': 'true', text: task[1] === ' ' ? '☐' : '☑' }), ' ');
            body[0] = task[2];
          }
          if (body.length === 1 || !body.slice(1).some((b) => mdStarts(b) || b === '')) {
            mdInline(body.join('\n'), li, 0);
          } else mdBlocks(body, li, depth + 1);
          list.append(li);
          while (i < lines.length && !lines[i].trim() && i + 1 < lines.length && (m = lines[i + 1].match(MD_ITEM)) && m[1].length === indent) i++;
        }
        parent.append(list);
        continue;
      }
      if (line.includes('|') && i + 1 < lines.length && MD_TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes('-')) {
        const head = mdCells(line);
        const aligns = mdCells(lines[i + 1]).map((c) => (c.endsWith(':') ? (c.startsWith(':') ? 'center' : 'right') : c.startsWith(':') ? 'left' : ''));
        i += 2;
        const rows = [];
        while (i < lines.length && lines[i].includes('|') && lines[i].trim()) rows.push(mdCells(lines[i++]));
        const cell = (tag, text, k) => {
          const c = el(tag, aligns[k] ? { class: 'al-' + aligns[k] } : {});
          mdInline(text, c, 0);
          return c;
        };
        parent.append(el('div', { class: 'table-wrap' }, el('table', { class: 'md-table' },
          el('thead', {}, el('tr', {}, ...head.map((h, k) => cell('th', h, k)))),
          el('tbody', {}, ...rows.map((r) => el('tr', {}, ...head.map((_, k) => cell('td', r[k] || '', k))))))));
        continue;
      }
      const para = [];
      while (i < lines.length && lines[i].trim() && !(para.length && mdStarts(lines[i]))) para.push(lines[i++]);
      const p = el('p');
      mdInline(para.join('\n'), p, 0);
      parent.append(p);
    }
  }

  // MD_INLINE finds the next inline construct: a code span, an image, a
  // link, an autolink, a bare URL, strong, emphasis, strikethrough, an
  // escaped character or a line break. Each alternative looks at most a
  // bounded distance from where it starts (a code span's opening run is
  // taken whole, never backtracked into), so that no text makes it slow.
  const MD_INLINE = /(?<!`)(`+)(?!`)([\s\S]{0,2000}?[^`])\1(?!`)|!\[([^\]\n]{0,500})\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)|\[((?:[^\[\]\n]|\[[^\[\]\n]{0,500}\]){0,500})\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)|<((?:https?:\/\/|mailto:)[^>\s]+)>|(https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"])|(\*\*|__)(?=\S)([^\n]{0,1000}?\S)\9|(\*|_)(?=\S)([^\n]{0,1000}?\S)\11(?!(?<=_)[A-Za-z0-9])|~~(?=\S)([^\n]{0,1000}?\S)~~|\\([!-\/:-@\[-`{-~])|( {2,}|\\)?\n/;

  function mdLink(text, url, parent, depth, title) {
    const u = String(url || '').trim();
    if (SAFE_URL.test(u)) {
      const a = el('a', { href: u, rel: 'noopener noreferrer nofollow', target: '_blank', title: title || null });
      mdInline(text || u, a, depth + 1, true);
      parent.append(a);
      // Where it leads, when its text says something else (as the
      // terminal shows it): a link's text may name another address.
      if (text && text !== u) parent.append(el('span', { class: 'link-dest', text: ' (' + u + ')' }));
      return;
    }
    // Not a link: the text, then the URL, as text.
    const span = el('span', { class: 'inert-link', title: 'not a web link: not opened' });
    mdInline(text, span, depth + 1, true);
    if (u) span.append(document.createTextNode(visible(' (' + u + ')')));
    parent.append(span);
  }

  // mdInline appends the inline content of text to parent; inLink (the
  // text of a link) makes no link of what it holds: a link's text that
  // is a URL stays its text, not a link inside the link.
  function mdInline(text, parent, depth, inLink) {
    if (depth > MD_MAX_DEPTH || text.length > MD_MAX_INLINE) { parent.append(document.createTextNode(visible(text))); return; }
    let rest = text;
    for (let guard = 0; rest && guard < 100000; guard++) {
      const m = rest.match(MD_INLINE);
      if (!m) break;
      // An underscore inside a word is not emphasis (snake_case).
      if (m[11] === '_' && m.index > 0 && /[A-Za-z0-9]/.test(rest[m.index - 1])) {
        parent.append(document.createTextNode(visible(rest.slice(0, m.index + 1))));
        rest = rest.slice(m.index + 1);
        continue;
      }
      if (m.index) parent.append(document.createTextNode(visible(rest.slice(0, m.index))));
      rest = rest.slice(m.index + m[0].length);
      if (m[1] !== undefined) {
        parent.append(el('code', { text: m[2].replace(/^ (.*) $/s, '$1') }));
      } else if (inLink && (m[4] !== undefined || m[6] !== undefined || m[7] !== undefined || m[8] !== undefined)) {
        parent.append(document.createTextNode(visible(m[0])));
      } else if (m[4] !== undefined) {
        mdLink('image: ' + (m[3] || m[4]), m[4], parent, depth);
      } else if (m[6] !== undefined) {
        mdLink(m[5], m[6], parent, depth);
      } else if (m[7] !== undefined) {
        mdLink(m[7], m[7], parent, depth);
      } else if (m[8] !== undefined) {
        mdLink(m[8], m[8], parent, depth);
      } else if (m[9] !== undefined) {
        const s = el('strong');
        mdInline(m[10], s, depth + 1, inLink);
        parent.append(s);
      } else if (m[11] !== undefined) {
        const s = el('em');
        mdInline(m[12], s, depth + 1, inLink);
        parent.append(s);
      } else if (m[13] !== undefined) {
        const s = el('del');
        mdInline(m[13], s, depth + 1, inLink);
        parent.append(s);
      } else if (m[14] !== undefined) {
        parent.append(document.createTextNode(m[14]));
      } else {
        parent.append(el('br'));
      }
    }
    if (rest) parent.append(document.createTextNode(visible(rest)));
  }

  // clock shows an event's time: the hour on the day it happened, with
  // the date before on another day; the full time is its title.
  function clock(iso) {
    const t = new Date(iso);
    if (isNaN(t)) return null;
    const now = new Date();
    const hm = t.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
    const text = t.toDateString() === now.toDateString() ? hm : t.toLocaleDateString() + ' ' + hm;
    return el('time', { class: 'at', datetime: t.toISOString(), title: t.toISOString(), text });
  }

  function block(label, cls, ...children) {
    return el('div', { class: 'ev ' + cls }, el('div', { class: 'label' }, el('span', { class: 'what', text: label })), ...children);
  }

  // oneLine is a value on one line, cut at max characters.
  function oneLine(v, max) {
    let s = (typeof v === 'string' ? v : JSON.stringify(v === undefined ? {} : v)) || '';
    s = s.replace(/\s+/g, ' ').trim();
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  }

  // toolCall is a call folded to one line (its name and arguments) that
  // opens on the whole arguments.
  function toolCall(req) {
    return el('details', { class: 'call', 'data-call': req.id || '' },
      el('summary', {}, el('strong', { text: req.tool_name || '?' }), ' ', el('span', { class: 'muted oneline', text: oneLine(req.args, 140) })),
      el('div', { class: 'muted small', text: 'call ' + (req.id || '') }),
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

  // lookAlikes adds to out (at most LOOK_MAX in all) what a person is
  // told of the words of s that mix Latin letters with letters of a
  // script that has look-alikes of them (Cyrillic, Greek, Armenian,
  // Cherokee): "gіthub.com" reads as github.com. It is the terminal's
  // (internal/safetext's LookAlikes): a word is a run of letters, marks,
  // digits, dots, hyphens and underscores; a word of one script is not
  // reported.
  const LOOK_MAX = 5;
  const LOOK_WORD = /[\p{L}\p{M}\p{Nd}._-]+/gu;
  const LOOK_LATIN = /\p{Script=Latin}/u;
  const LOOK_SCRIPTS = [
    [/\p{Script=Cyrillic}/u, 'a Cyrillic'], [/\p{Script=Greek}/u, 'a Greek'],
    [/\p{Script=Armenian}/u, 'an Armenian'], [/\p{Script=Cherokee}/u, 'a Cherokee'],
  ];
  function lookAlikes(s, out) {
    for (const m of String(s).matchAll(LOOK_WORD)) {
      if (out.length >= LOOK_MAX) return;
      const w = m[0];
      if (!LOOK_LATIN.test(w)) continue;
      for (const c of w) {
        const hit = LOOK_SCRIPTS.find(([re]) => re.test(c));
        if (!hit) continue;
        const runes = [...w];
        const word = runes.length > 60 ? runes.slice(0, 60).join('') + '…' : w;
        out.push('"' + word + '": ' + c + ' is U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + ', ' + hit[1] + ' letter');
        break;
      }
    }
  }

  // lookAlikeNote is the warning of the look-alike words of texts, or
  // null when there are none.
  function lookAlikeNote(texts) {
    const out = [];
    for (const t of texts) lookAlikes(t, out);
    if (!out.length) return null;
    return el('div', { class: 'lookalike' },
      el('p', { text: '⚠ look-alike letters: these words mix Latin letters with letters of another script that draw the same, as a disguised address does:' }),
      el('ul', {}, ...out.map((w) => el('li', { text: w }))));
  }

  // APPROVE_DELAY is how long an approval card's Approve stays disabled
  // after the card first shows (approvalShownAt).
  const APPROVE_DELAY = 1000;

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
    // Every string the call is given, the ones shown above and the others.
    const strings = [];
    JSON.stringify(args, (_, v) => { if (typeof v === 'string') strings.push(v); return v; });
    return el('div', { class: 'preview', 'data-tool': name }, head(title), lookAlikeNote(strings), ...parts);
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
  // eventImage is the data URL of an event's base64 image of a known
  // type, or '' for anything else.
  function eventImage(i) {
    if (!i || i.type !== 'base64' || !IMAGE_TYPES.has(i.media_type) || typeof i.source !== 'string' || !/^[A-Za-z0-9+/=\s]*$/.test(i.source)) return '';
    return 'data:' + i.media_type + ';base64,' + i.source.replace(/\s/g, '');
  }
  function image(img, alt) {
    const src = eventImage(img);
    if (!src) return el('p', { class: 'muted', text: '(an image that cannot be shown)' });
    const i = el('img', { alt: alt || 'screenshot' });
    i.src = src;
    return i;
  }

  // compactedText says what a ContextCompactedEvent says: the transcript
  // was compacted, by what, from what to what, and why.
  function compactedText(d) {
    const n = (v) => (typeof v === 'number' && isFinite(v) ? v : 0);
    const tokens = (v) => (n(v) >= 1000 ? (n(v) / 1000).toFixed(1) + 'k' : String(n(v)));
    let t = 'context compacted' + (d.strategy ? ' by ' + d.strategy : '') + ': ' + n(d.messages_before) + ' → ' + n(d.messages_after) +
      ' messages, about ' + tokens(d.tokens_before) + ' → ' + tokens(d.tokens_after) + ' tokens';
    if (n(d.window) > 0) t += ' of a ' + tokens(d.window) + ' window';
    return t + (d.reason === 'context_length' ? '; the model refused the request as too long, and it was sent again' : '; before the next request');
  }

  // STATUS_WORDS say a session's state in words.
  const STATUS_WORDS = {
    queued: 'queued', pending: 'about to run', running: 'running', paused: 'paused',
    idle: 'waiting for a message', awaiting_tool_results: 'waiting for tool results or approvals',
    completed: 'completed', failed: 'failed', timed_out: 'timed out', interrupted: 'cancelled',
  };
  function words(st) { return STATUS_WORDS[st] || String(st || '?'); }

  const FLOW_WORDS = {
    pause: 'Paused', resume: 'Resumed', force_answer: 'Asked for the answer now',
    approve: 'Approved', reject: 'Rejected',
  };

  // activeWords says what an ActiveStateChangeEvent means.
  function activeWords(d) {
    const a = (d.pending_approvals || []).length, c = (d.pending_tool_calls || []).length;
    if (d.state === 'running') return 'Working';
    if (d.state === 'idle') return 'Waiting for a message';
    const parts = [];
    if (a) parts.push(a + (a === 1 ? ' approval' : ' approvals'));
    if (c) parts.push(c + (c === 1 ? ' client tool result' : ' client tool results'));
    return 'Waiting for ' + (parts.join(' and ') || 'tool results');
  }

  // folded is a result folded to one line, opening on the whole text.
  function folded(label, cls, text) {
    return el('details', { class: 'fold ' + cls },
      el('summary', {}, el('span', { class: 'what', text: label }), ' ', el('span', { class: 'muted oneline', text: oneLine(text, 140) })),
      el('pre', { class: 'result', text }));
  }

  // renderEvent returns the element of one event of the trajectory:
  // what people say and the agent answers as Markdown, its tool calls
  // and their results folded to a line, the rest as short lines in
  // words; each with its time.
  function renderEvent(e) {
    const d = e.data || {};
    let node;
    switch (e.type === 'AgentEvent' ? kindOf(e) : e.type) {
      case 'message_event': {
        const parts = Array.isArray(d.content) ? d.content : [d.content];
        node = block(d.caller_id && d.caller_id !== 'user' ? 'Message from ' + d.caller_id : 'You', 'message_event bubble', ...parts.map((p) => {
          if (typeof p === 'string') return el('div', { class: 'text' }, markdown(p));
          if (p && typeof p.text === 'string') return el('div', { class: 'text' }, markdown(p.text));
          if (p && p.type === 'image_url' && p.image_url && typeof p.image_url.url === 'string') {
            const m = p.image_url.url.match(/^data:([a-z/]+);base64,(.*)$/s);
            return m ? image({ type: 'base64', media_type: m[1], source: m[2] }, 'an image of the message') : el('p', { class: 'muted', text: '(an image)' });
          }
          return el('pre', { text: pretty(p) });
        }));
        break;
      }
      case 'policy_event': {
        const reqs = d.tool_reqs || [];
        node = block(reqs.length ? (reqs.length === 1 ? 'Agent: calls a tool' : 'Agent: calls ' + reqs.length + ' tools') : 'Agent', 'policy_event',
          d.reasoning_content ? el('details', { class: 'thinking' }, el('summary', { text: 'thinking' }), el('div', { class: 'text', text: d.reasoning_content })) : null,
          d.content ? el('div', { class: 'text content' }, markdown(d.content)) : null,
          ...reqs.map(toolCall),
          ...(d.validation_errors || []).map((v) => el('p', { class: 'error', text: v })));
        if (d.content) node.dataset.content = String(d.content).slice(0, MD_MAX_CHARS);
        break;
      }
      case 'tool_result': {
        const name = (d.tool_req && d.tool_req.tool_name) || '?';
        const plan = name === 'todo_write' ? checklist(d.tool_req.args) : null;
        node = el('div', { class: 'ev tool_result' }, plan, folded('Result of ' + name, 'result-fold', pretty(d.result)));
        break;
      }
      case 'error_event':
        node = block('Error' + (d.tool_req ? ' in ' + d.tool_req.tool_name : '') + (d.origin ? ' (' + d.origin + ')' : ''), 'error_event',
          el('pre', { class: 'result', text: d.error || '' }));
        break;
      case 'answer_event':
        node = block('Answer' + (d.outcome && d.outcome !== 'success' ? ' (' + d.outcome + ')' : ''), 'answer_event bubble',
          el('div', { class: 'text answer' }, typeof d.answer === 'string' ? markdown(d.answer) : el('pre', { text: pretty(d.answer) })));
        break;
      case 'observation_event':
        node = block(d.type === 'web' ? 'Browser screenshot' : 'Image' + (d.tool_req ? ' from ' + d.tool_req.tool_name : ''), 'observation_event', image(d.image, d.type === 'web' ? 'browser screenshot' : 'image from ' + ((d.tool_req && d.tool_req.tool_name) || 'a tool')));
        break;
      case 'flow_event':
        node = el('div', { class: 'ev meta flow_event', 'data-flow': d.flow || '' },
          el('span', { class: 'what', text: (FLOW_WORDS[d.flow] || String(d.flow || '?')) + (d.tool_req ? ' ' + d.tool_req.tool_name : '') }));
        break;
      case 'AgentStartedEvent':
        node = el('div', { class: 'ev meta AgentStartedEvent' }, el('span', { class: 'what', text: 'Started' }));
        break;
      case 'AgentCompletionEvent':
        node = el('div', { class: 'ev meta AgentCompletionEvent' }, el('span', { class: 'what', text: 'Finished' + (d.status ? ': ' + words(d.status) : '') }));
        break;
      case 'AgentErrorEvent':
        node = block('The agent failed', 'AgentErrorEvent', el('pre', { text: typeof d.message === 'string' ? d.message : pretty(d) }));
        break;
      case 'MetricsUpdateEvent':
        node = el('div', { class: 'ev meta MetricsUpdateEvent' }, el('span', { class: 'what', text: 'So far: ' + summary(d) }));
        break;
      case 'ActiveStateChangeEvent':
        node = el('div', { class: 'ev meta ActiveStateChangeEvent' }, el('span', { class: 'what', text: activeWords(d) }));
        break;
      case 'AgentRunStatusChangeEvent':
        node = el('div', { class: 'ev meta AgentRunStatusChangeEvent' }, el('span', { class: 'what', text: 'Now ' + words(d.status) }));
        break;
      case 'ContextCompactedEvent':
        node = el('div', { class: 'ev meta ContextCompactedEvent', text: compactedText(d) });
        break;
      case 'AttachmentEvent':
        node = el('div', { class: 'ev meta AttachmentEvent', text: 'file ' + (d.origin === 'agent' ? 'from the agent' : 'attached') + ': ' + (d.path || d.name || '?') + ' (' + (d.media_type || '?') + ', ' + (d.size_bytes || 0) + ' bytes)' });
        break;
      default:
        node = el('div', { class: 'ev meta ' + (e.type || '') }, el('span', { class: 'what', text: String(e.type || '?') }),
          Object.keys(d).length ? el('span', { class: 'muted', text: ' ' + oneLine(d, 200) }) : null);
    }
    const at = clock(e.timestamp);
    if (at) {
      const label = node.querySelector(':scope > .label, :scope > details > summary') || node;
      label.append(' ', at);
    }
    node.dataset.index = String(e.index);
    node.dataset.type = e.type === 'AgentEvent' ? kindOf(e) : e.type;
    return node;
  }

  // trajectoryView is a session's trajectory as the session page and the
  // shared view both show it: the plan, then the events as a
  // conversation, each event once and in the order of the log. The
  // answer shows once: the model's text that an answer repeats is left
  // out of the step that wrote it. onActive receives the data of each
  // ActiveStateChangeEvent (the calls waiting) and its index, onMetrics that of each
  // MetricsUpdateEvent, onEvent each event.
  function trajectoryView(onActive, onMetrics, onEvent) {
    const planBox = el('div', { id: 'plan' });
    const traj = el('div', { id: 'events' });
    let last = -1, lastPolicy = null;
    function add(e) {
      if (!e || typeof e.index !== 'number' || e.index <= last) return;
      last = e.index;
      const node = renderEvent(e);
      const d = e.data || {};
      const kind = e.type === 'AgentEvent' ? kindOf(e) : e.type;
      if (kind === 'answer_event' && lastPolicy && typeof d.answer === 'string' && lastPolicy.dataset.content === d.answer.slice(0, MD_MAX_CHARS)) {
        const c = lastPolicy.querySelector(':scope > .content');
        if (c) c.remove();
        if (!lastPolicy.querySelector(':scope > .call, :scope > details.thinking, :scope > .error')) lastPolicy.remove();
      }
      if (kind === 'policy_event') lastPolicy = node;
      else if (kind !== 'MetricsUpdateEvent' && kind !== 'ActiveStateChangeEvent' && kind !== 'AgentRunStatusChangeEvent') lastPolicy = null;
      traj.append(node);
      if (e.type === 'ActiveStateChangeEvent') onActive(d, e.index);
      if (e.type === 'MetricsUpdateEvent') onMetrics(d);
      if (onEvent) onEvent(e);
      if (kind === 'tool_result' && d.tool_req && d.tool_req.tool_name === 'todo_write') {
        const plan = checklist(d.tool_req.args);
        if (plan) planBox.replaceChildren(el('div', { class: 'card' }, el('div', { class: 'label', text: 'plan' }), plan));
      }
    }
    return { planBox, traj, add, last: () => last };
  }

  // pendingCards shows the calls an ActiveStateChangeEvent says are
  // waiting for approval or for a client's result, but those skip(kind,
  // req) is true of (kind 'approval' or 'tool'). steer (the session
  // page's) returns the controls that answer a call; without it the cards
  // are read-only.
  function pendingCards(as, skip, steer) {
    const cards = [];
    for (const req of (as && as.pending_approvals) || []) {
      if (!req || skip('approval', req)) continue;
      const card = el('div', { class: 'card approval', 'data-call': req.id },
        el('div', { class: 'label', text: 'approval needed' }),
        // Why only a person may decide it, as the tool (not the model)
        // says: a safety check, typing into a password field.
        typeof req.reason === 'string' && req.reason ? el('div', { class: 'person-reason', text: '⚠ ' + req.reason.slice(0, 4096) }) : null,
        preview(req));
      if (steer) card.append(...steer.approval(req, card));
      cards.push(card);
    }
    for (const req of (as && as.pending_tool_calls) || []) {
      if (!req || skip('tool', req)) continue;
      const card = el('div', { class: 'card client-tool', 'data-call': req.id },
        el('div', { class: 'label', text: 'client tool call waiting for a result' }), toolCall(req));
      if (steer) card.append(...steer.toolCall(req, card));
      cards.push(card);
    }
    return cards;
  }

  // --- the live view of a session's browser ---

  // liveView shows the latest picture of the session's browser: while
  // the session has not ended, it asks GET .../live for a frame, one
  // request at a time, LIVE_WAIT after a frame and from LIVE_WAIT_MIN
  // doubling to LIVE_WAIT_MAX while there is none (the browser starts
  // with the agent's first browser call, and closes while the session
  // waits), and not while the page is hidden; it stops once the session
  // has ended. Between live frames, and after the end, it shows the
  // latest browser screenshot of the events. A frame is at most
  // LIVE_MAX_BYTES of JPEG.
  const LIVE_WAIT = 1000, LIVE_WAIT_MIN = 2000, LIVE_WAIT_MAX = 16000;
  const LIVE_MAX_BYTES = 1 << 20;

  // livePoller asks GET sessions/ID/PATH for frames as liveView says,
  // and hands each to onFrame(url, at); shownAt() is the time of the
  // picture on show, and what names the thing in the notes.
  function livePoller(id, path, box, note, what, onFrame, shownAt) {
    let stopped = false, timer = 0, busy = false, wait = LIVE_WAIT_MIN, st = '', frames = 0;
    async function tick() {
      timer = 0;
      if (stopped || busy || TERMINAL.has(st)) return;
      if (document.hidden) { timer = setTimeout(tick, LIVE_WAIT_MIN); return; }
      busy = true;
      let next = LIVE_WAIT;
      try {
        const r = await fetch(new URL('sessions/' + encodeURIComponent(id) + '/' + path, API), { credentials: 'same-origin', cache: 'no-store' });
        if (r.ok && r.headers.get('Content-Type') === 'image/jpeg') {
          const blob = await r.blob();
          if (blob.size > 0 && blob.size <= LIVE_MAX_BYTES) {
            const url = await readAs(blob, 'url');
            const at = Date.parse(r.headers.get('X-Frame-Time') || '') || Date.now();
            if (!stopped && typeof url === 'string' && url.startsWith('data:image/jpeg;base64,')) {
              frames++;
              box.dataset.frames = String(frames);
              onFrame(url, at);
            }
          }
          wait = LIVE_WAIT_MIN;
        } else {
          if (r.status === 401) { stopped = true; return; }
          if (!box.hidden && box.dataset.source === 'live') note.textContent = visible('the ' + what + ' is closed while the session waits · last seen ' + new Date(shownAt()).toLocaleTimeString());
          next = wait;
          wait = Math.min(wait * 2, LIVE_WAIT_MAX);
        }
      } catch {
        next = wait;
        wait = Math.min(wait * 2, LIVE_WAIT_MAX);
      } finally { busy = false; }
      if (!stopped && !TERMINAL.has(st)) timer = setTimeout(tick, next);
    }
    return {
      // state follows the session's state: a session that runs again
      // (a message, a resume) is watched again at once.
      state(s) {
        const was = st;
        st = s || '';
        if (TERMINAL.has(st)) {
          clearTimeout(timer); timer = 0;
          if (!box.hidden) note.textContent = visible('the session has ended · last seen ' + new Date(shownAt()).toLocaleTimeString());
          return;
        }
        if (was !== st) wait = LIVE_WAIT_MIN;
        if (!timer && !busy) tick();
      },
      stop() { stopped = true; clearTimeout(timer); },
    };
  }

  function liveView(id) {
    // The picture is made with the first frame: until then the view has
    // no element to show.
    let img = null;
    const note = el('span', { class: 'muted', id: 'live-note' });
    const box = el('div', { class: 'card live', id: 'live', hidden: true },
      el('div', { class: 'label' }, el('span', { class: 'what', text: 'Browser' }), note));
    let shownAt = 0;
    function show(src, at, what) {
      if (at < shownAt) return;
      shownAt = at;
      if (!img) box.append(img = el('img', { id: 'live-img', alt: 'the session’s browser' }));
      img.src = src;
      box.hidden = false;
      box.dataset.source = what;
      note.textContent = visible((what === 'live' ? 'live · ' : 'screenshot · ') + new Date(at).toLocaleTimeString());
    }
    const poll = livePoller(id, 'live', box, note, 'browser', (url, at) => show(url, at, 'live'), () => shownAt);
    return {
      box,
      // state follows the session's state: a session that runs again
      // (a message, a resume) is watched again at once.
      state: poll.state,
      // onEvent shows a browser screenshot of the events when it is newer.
      onEvent(e) {
        const d = e.data || {};
        if (e.type !== 'AgentEvent' || kindOf(e) !== 'observation_event' || d.type !== 'web') return;
        const url = eventImage(d.image);
        if (url) show(url, Date.parse(e.timestamp) || 0, 'event');
      },
      stop: poll.stop,
    };
  }

  // --- the live view of a session's desktop ---

  // desktopView shows the session's desktop: its latest picture (GET
  // .../live/desktop while the session runs, polled as liveView polls
  // the browser's; else the latest screenshot a computer call returned,
  // from the events), with the actions of the computer call drawn on it:
  // where it clicked, moved, dragged or scrolled, numbered in order, and
  // listed below it with what it typed and which keys it pressed, as text.
  // Over a live picture the drawn call is the latest one; over an event's
  // screenshot, the call that returned it. Pictures and coordinates are
  // the model's view of the screen, so a point is drawn at x/width,
  // y/height of the picture. Bounded: DESK_MAX_ACTIONS actions,
  // DESK_MAX_TEXT characters of a text, DESK_MAX_PATH points of a drag,
  // LIVE_MAX_BYTES of JPEG.
  const DESK_MAX_ACTIONS = 16, DESK_MAX_TEXT = 200, DESK_MAX_PATH = 64;
  const SVG = 'http://www.w3.org/2000/svg';

  // deskActions returns the actions of a computer call's arguments (a
  // batch's, or the one), each checked: numbers where coordinates are.
  function deskActions(args) {
    if (typeof args === 'string') { try { args = JSON.parse(args); } catch { return []; } }
    if (!args || typeof args !== 'object') return [];
    const list = args.action === 'batch' && Array.isArray(args.actions) ? args.actions : [args];
    const pt = (p) => Array.isArray(p) && p.length === 2 && p.every((v) => typeof v === 'number' && isFinite(v) && v >= 0) ? [p[0], p[1]] : null;
    const out = [];
    for (const a of list.slice(0, DESK_MAX_ACTIONS)) {
      if (!a || typeof a !== 'object' || typeof a.action !== 'string') continue;
      out.push({
        action: a.action.slice(0, 40),
        at: pt(a.coordinate),
        from: pt(a.start_coordinate),
        path: Array.isArray(a.path) ? a.path.slice(0, DESK_MAX_PATH).map(pt).filter(Boolean) : [],
        text: typeof a.text === 'string' ? a.text : '',
        dir: ['up', 'down', 'left', 'right'].includes(a.scroll_direction) ? a.scroll_direction : '',
        amount: Number.isInteger(a.scroll_amount) ? a.scroll_amount : 0,
        duration: typeof a.duration === 'number' && isFinite(a.duration) ? a.duration : 0,
      });
    }
    return out;
  }

  // deskLine says what an action did, for the list under the picture.
  function deskLine(a, i) {
    const at = a.at ? ' at [' + Math.round(a.at[0]) + ', ' + Math.round(a.at[1]) + ']' : '';
    const cut = (t) => t.length > DESK_MAX_TEXT ? t.slice(0, DESK_MAX_TEXT) + '… (' + t.length + ' characters)' : t;
    let what;
    switch (a.action) {
      case 'type': what = 'typed ' + JSON.stringify(cut(a.text)); break;
      case 'key': what = 'pressed keys ' + JSON.stringify(cut(a.text)); break;
      case 'hold_key': what = 'held keys ' + JSON.stringify(cut(a.text)) + ' for ' + a.duration + 's'; break;
      case 'scroll': what = 'scrolled ' + a.dir + ' by ' + a.amount + at; break;
      case 'left_click_drag': what = 'dragged' + (a.from ? ' from [' + Math.round(a.from[0]) + ', ' + Math.round(a.from[1]) + ']' : '') + (a.at ? ' to [' + Math.round(a.at[0]) + ', ' + Math.round(a.at[1]) + ']' : ''); break;
      case 'wait': what = 'waited ' + a.duration + 's'; break;
      default: what = a.action.replace(/_/g, ' ') + at;
    }
    if (a.text && !['type', 'key', 'hold_key'].includes(a.action)) what += ' holding ' + JSON.stringify(cut(a.text));
    return (i + 1) + '. ' + what;
  }

  function desktopView(id) {
    let img = null, svg = null;
    const note = el('span', { class: 'muted', id: 'desk-note' });
    const screen = el('div', { class: 'desk-screen' });
    const list = el('ol', { class: 'desk-actions', id: 'desk-actions' });
    const box = el('div', { class: 'card live desk', id: 'desk', hidden: true },
      el('div', { class: 'label' }, el('span', { class: 'what', text: 'Desktop' }), note), screen, list);
    let shownAt = 0;
    let latest = [];   // the actions of the latest computer call
    let drawn = [];    // the actions drawn on the picture shown
    function draw() {
      list.replaceChildren(...drawn.map((a, i) => el('li', { text: deskLine(a, i) })));
      if (!img || !img.naturalWidth) return;
      const W = img.naturalWidth, H = img.naturalHeight, r = Math.max(6, Math.round(Math.max(W, H) / 90));
      svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
      const marks = [];
      const node = (tag, attrs) => {
        const n = document.createElementNS(SVG, tag);
        for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
        return n;
      };
      drawn.forEach((a, i) => {
        const g = node('g', { class: 'mark', 'data-kind': a.action, 'data-n': i + 1 });
        if (a.action === 'left_click_drag' && a.at) {
          const pts = [a.from, ...a.path, a.at].filter(Boolean);
          g.append(node('polyline', { points: pts.map((p) => p[0] + ',' + p[1]).join(' '), 'stroke-width': Math.max(2, r / 3) }));
        }
        if (!a.at) { if (g.childNodes.length) marks.push(g); return; }
        const [x, y] = a.at;
        g.setAttribute('data-x', x); g.setAttribute('data-y', y);
        g.append(node('circle', { cx: x, cy: y, r, 'stroke-width': Math.max(2, r / 3) }));
        if (a.action === 'scroll' && a.dir) {
          const d = { up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0] }[a.dir], len = r * (2 + Math.min(a.amount, 10));
          g.append(node('line', { x1: x, y1: y, x2: x + d[0] * len, y2: y + d[1] * len, 'stroke-width': Math.max(2, r / 3) }));
        }
        const t = node('text', { x: x + r + 2, y: y - r - 2, 'font-size': r * 2 });
        t.textContent = String(i + 1);
        g.append(t);
        marks.push(g);
      });
      svg.replaceChildren(...marks);
    }
    function show(src, at, what, actions) {
      if (at < shownAt) return;
      shownAt = at;
      if (!img) {
        img = el('img', { id: 'desk-img', alt: 'the session’s desktop' });
        img.addEventListener('load', draw);
        svg = document.createElementNS(SVG, 'svg');
        svg.setAttribute('preserveAspectRatio', 'none');
        screen.append(img, svg);
      }
      drawn = actions;
      img.src = src;
      box.hidden = false;
      box.dataset.source = what;
      note.textContent = visible((what === 'live' ? 'live · ' : 'screenshot · ') + new Date(at).toLocaleTimeString());
      draw();
    }
    const poll = livePoller(id, 'live/desktop', box, note, 'desktop', (url, at) => show(url, at, 'live', latest), () => shownAt);
    return {
      box,
      state: poll.state,
      // onEvent follows the computer calls of the events, and shows
      // their screenshots when they are newer than the picture.
      onEvent(e) {
        const d = e.data || {};
        if (e.type !== 'AgentEvent') return;
        const kind = kindOf(e);
        if (kind === 'policy_event' && Array.isArray(d.tool_reqs)) {
          for (const r of d.tool_reqs) {
            if (r && r.tool_name === 'computer') latest = deskActions(r.args);
          }
          if (box.dataset.source === 'live') { drawn = latest; draw(); }
          return;
        }
        if (kind !== 'observation_event' || !d.tool_req || d.tool_req.tool_name !== 'computer') return;
        const url = eventImage(d.image);
        if (url) show(url, Date.parse(e.timestamp) || 0, 'event', deskActions(d.tool_req.args));
      },
      stop: poll.stop,
    };
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
        try { await api(method || 'POST', 'sessions/' + encodeURIComponent(id) + path); toast(label + ': sent'); connect(); } catch (e) { toast(label + ' failed: ' + e.message); }
        poll();
      } },
      disabled: true,
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
    const msgFiles = el('input', { type: 'file', id: 'message-files', multiple: true, 'aria-label': 'Files' });
    const sendBtn = el('button', { type: 'submit', class: 'primary', id: 'btn-send', text: 'Send' });
    const send = el('form', { class: 'send', id: 'send' }, msg, el('div', { class: 'send-side' }, msgFiles, sendBtn));
    send.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (!msg.value.trim()) return;
      sendBtn.disabled = true;
      try {
        const att = await readAttachments(msgFiles.files);
        await writeFiles(id, att);
        await api('POST', 'sessions/' + encodeURIComponent(id) + '/messages', userMessage(msg.value, att));
        msg.value = '';
        msgFiles.value = '';
        connect();
        poll();
      } catch (e) { toast('Sending failed: ' + e.message); }
      sendBtn.disabled = false;
    });
    const pending = el('div', { class: 'pending', id: 'pending' });
    const live = liveView(id);
    const desk = desktopView(id);
    const tv = trajectoryView(renderPending, () => {}, (e) => { live.onEvent(e); desk.onEvent(e); });
    const streamInfo = el('p', { class: 'muted', id: 'stream-info', text: 'connecting…' });
    main.replaceChildren(head, meta, controls, shareOut, live.box, desk.box, tv.planBox,
      el('div', { class: 'traj' }, el('h2', { text: 'Conversation' }), tv.traj, streamInfo), pending, send);

    // allowed says which controls a state allows: pause what has not
    // ended and is not paused, resume what is paused, force the answer of
    // what has not ended and has not answered, cancel what has not ended.
    // A message is always allowed (it restarts an ended session).
    function allowed(st) {
      const ended = TERMINAL.has(st);
      return {
        'btn-pause': !!st && !ended && st !== 'paused',
        'btn-resume': st === 'paused',
        'btn-force-answer': !!st && !ended && st !== 'idle',
        'btn-cancel': !!st && !ended,
      };
    }
    function setButtons(st) {
      for (const [bid, ok] of Object.entries(allowed(st))) {
        const b = controls.querySelector('#' + bid);
        b.disabled = !ok;
        b.title = ok ? '' : 'not while the session is ' + words(st);
      }
    }

    let stopped = false, timer = 0;
    // A call's wait is keyed by the call's kind and id and by the index of
    // the ActiveStateChangeEvent from which it has been waiting without a
    // break (waitingSince): a call's id is the model's, and a model may
    // use one again (after a compaction, the transcript no longer shows
    // it), so the id alone would take a new call for one already decided.
    // waitingSince maps kind and id to that index, for the calls of the
    // latest ActiveStateChangeEvent.
    let waitingSince = new Map();
    const waitKey = (kind, req) => {
      const k = kind + ' ' + String(req.id);
      return k + ' @' + (waitingSince.has(k) ? waitingSince.get(k) : -1);
    };
    // decided are the waits the person answered here: their cards stay
    // hidden until an ActiveStateChangeEvent no longer lists the call (a
    // call waiting again after that is a new wait, and shows).
    const decided = new Set();
    // approvalShownAt is when each wait's approval card was first shown: its
    // Approve answers no click in the first APPROVE_DELAY, so that a card
    // that appears under the pointer (it pushes the message box down) is
    // not approved by a click meant for what was there.
    const approvalShownAt = new Map();

    async function poll() {
      clearTimeout(timer);
      try {
        const [v, c] = await Promise.all([api('GET', 'sessions/' + encodeURIComponent(id)), metricsOf(id)]);
        if (stopped) return;
        const st = v.status && v.status.status;
        badge.replaceChildren(stateBadge(st));
        setButtons(st);
        usageLine.textContent = visible((agentName(v) ? agentName(v) + ' · ' : '') + summary(c));
        live.state(st);
        desk.state(st);
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
        const key = waitKey('approval', req);
        const reason = el('input', { type: 'text', placeholder: 'reason (optional)', class: 'reason' });
        const decide = (approved) => async () => {
          try {
            await api('POST', 'sessions/' + encodeURIComponent(id) + '/approvals', { id: req.id, approved, reason: reason.value || undefined });
            decided.add(key); card.remove();
          } catch (e) { toast('Decision failed: ' + e.message); }
        };
        if (!approvalShownAt.has(key)) approvalShownAt.set(key, Date.now());
        const approve = el('button', { type: 'button', class: 'primary approve', text: 'Approve', on: { click: decide(true) } });
        const wait = APPROVE_DELAY - (Date.now() - approvalShownAt.get(key));
        if (wait > 0) {
          approve.disabled = true;
          approve.title = 'enabled a moment after the call is shown, so that a click meant for something else does not approve it';
          setTimeout(() => { approve.disabled = false; approve.removeAttribute('title'); }, wait);
        }
        return [el('div', { class: 'controls' },
          approve,
          el('button', { type: 'button', class: 'danger reject', text: 'Reject', on: { click: decide(false) } }), reason)];
      },
      toolCall(req, card) {
        const key = waitKey('tool', req);
        const result = el('textarea', { class: 'tool-result', placeholder: 'result (text, or JSON)' });
        const answer = (isError) => async () => {
          let value = result.value;
          try { value = JSON.parse(value); } catch { /* text */ }
          const body = isError
            ? { kind: 'error_event', error: result.value, origin: 'custom_tools', tool_req: req }
            : { kind: 'tool_result', tool_req: req, result: value };
          try {
            await api('POST', 'sessions/' + encodeURIComponent(id) + '/tool_results', body);
            decided.add(key); card.remove();
          } catch (e) { toast('Answer failed: ' + e.message); }
        };
        return [result, el('div', { class: 'controls' },
          el('button', { type: 'button', class: 'primary send-result', text: 'Send result', on: { click: answer(false) } }),
          el('button', { type: 'button', class: 'danger send-error', text: 'Send as error', on: { click: answer(true) } }))];
      },
    };

    // renderPending shows the calls of an ActiveStateChangeEvent (index:
    // its index in the log; as null: none waits), given in the log's
    // order, and forgets the waits that ended.
    function renderPending(as, index) {
      const next = new Map();
      for (const [kind, list] of [['approval', as && as.pending_approvals], ['tool', as && as.pending_tool_calls]]) {
        for (const req of Array.isArray(list) ? list : []) {
          if (!req) continue;
          const k = kind + ' ' + String(req.id);
          next.set(k, waitingSince.has(k) ? waitingSince.get(k) : index);
        }
      }
      waitingSince = next;
      const live = new Set([...next].map(([k, i]) => k + ' @' + i));
      for (const k of decided) if (!live.has(k)) decided.delete(k);
      for (const k of approvalShownAt.keys()) if (!live.has(k)) approvalShownAt.delete(k);
      const cards = pendingCards(as, (kind, req) => decided.has(waitKey(kind, req)), steer);
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
      for (const t of ['AgentEvent', 'AgentStartedEvent', 'AgentCompletionEvent', 'AgentErrorEvent', 'AgentRunStatusChangeEvent', 'ActiveStateChangeEvent', 'MetricsUpdateEvent', 'ContextCompactedEvent', 'AttachmentEvent', 'message']) {
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
    cleanup.push(() => { stopped = true; clearTimeout(timer); if (es) es.close(); live.stop(); desk.stop(); });
    connect();
    poll();
  }

  // --- managing what the API manages ---

  // The registries (agents, environments, skills), webhooks and
  // schedules of the key, each listed with what it is, and edited as
  // the JSON the API takes (the server checks it, and its error shows
  // beside the editor: nothing typed is lost).
  function itemPath(name) {
    return String(name).split('/').map(encodeURIComponent).join('/');
  }

  const KINDS = {
    agents: {
      title: 'Agents', path: 'agents', key: (x) => x.name,
      cols: ['Name', 'Description', 'Model', 'Environments'],
      row: (x) => [x.name, x.description || '', x.model || 'default model', (x.environments || []).map((e) => (typeof e === 'string' ? e : e.id || e.kind)).join(', ')],
      template: { name: 'my-agent', description: 'What it does.', instructions: 'How it works.', environments: [] },
      replace: 'PUT',
    },
    environments: {
      title: 'Environments', path: 'environments', key: (x) => x.id,
      cols: ['Id', 'Kind', 'Start URL'],
      row: (x) => [x.id, x.kind || '', x.start_url || ''],
      template: { id: 'my-web', kind: 'web', start_url: 'https://example.com/' },
      replace: 'PUT',
    },
    skills: {
      title: 'Skills', path: 'skills', key: (x) => x.name,
      cols: ['Name', 'Description'],
      row: (x) => [x.name, x.description || ''],
      template: { name: 'my-skill', description: 'When to use it.', body: 'What to do.' },
      replace: 'PUT',
    },
    webhooks: {
      title: 'Webhooks', path: 'webhooks', key: (x) => x.id,
      cols: ['URL', 'Events', 'State', 'Last delivery'],
      row: (x) => [x.url, (x.enabled_events || []).join(', '), x.disabled ? 'disabled' : 'enabled',
        x.last_delivery_status ? x.last_delivery_status + (x.last_delivery_at ? ' · ' + age(x.last_delivery_at) + ' ago' : '') + (x.consecutive_failures ? ' · ' + x.consecutive_failures + ' failures in a row' : '') : 'none yet'],
      template: { url: 'https://example.com/hooks/hrns', enabled_events: ['*'], description: 'My receiver' },
      editable: (x) => ({ url: x.url, enabled_events: x.enabled_events, description: x.description, disabled: x.disabled }),
      replace: 'PATCH',
      actions: (x) => [['Ping', 'POST', '/ping'], ['Rotate secret', 'POST', '/rotate']],
      sub: { title: 'Delivery log', path: '/deliveries?size=50', cols: ['Event', 'Session', 'State', 'Attempts', 'When'],
        row: (d) => [d.event_type, d.session_id ? { link: '#/s/' + encodeURIComponent(d.session_id), text: d.session_id } : '', d.state, (d.attempts || []).map((a) => '#' + a.attempt + ' ' + (a.status_code ? 'HTTP ' + a.status_code : a.error || '?')).join('; '), age(d.created_at) + ' ago'] },
    },
    schedules: {
      title: 'Schedules', path: 'schedules', key: (x) => x.id,
      cols: ['Name', 'When', 'State', 'Next run'],
      row: (x) => [x.name, (x.timing && x.timing.expression || '') + (x.timing && x.timing.timezone ? ' (' + x.timing.timezone + ')' : ''),
        x.paused ? 'paused' + (x.pause_note ? ': ' + x.pause_note : '') : 'active', (x.next_run_times || [])[0] || ''],
      template: { name: 'morning digest', timing: { type: 'cron', expression: '0 9 * * 1-5', timezone: 'UTC' }, session_request: { agent: 'my-agent', messages: 'Summarise what happened overnight.' } },
      editable: (x) => ({ name: x.name, description: x.description, timing: x.timing, session_request: x.session_request }),
      replace: 'PATCH',
      actions: (x) => [x.paused ? ['Resume', 'POST', '/resume'] : ['Pause', 'POST', '/pause'], ['Run now', 'POST', '/trigger']],
      sub: { title: 'Runs', path: '/runs?size=50', cols: ['Scheduled for', 'Status', 'Session', 'Error'],
        row: (r) => [r.scheduled_for + (r.triggered_manually ? ' (by hand)' : ''), r.status, r.session_id ? { link: '#/s/' + encodeURIComponent(r.session_id), text: r.session_id } : '', r.error || ''] },
    },
    profiles: { title: 'Browser profiles', view: (tabs) => showProfiles(tabs) },
  };

  // --- browser profiles ---

  // showProfiles lists the key's browser profiles (/browser-profiles),
  // uploads one (initiate-upload, the archive posted as a form to the
  // upload target, complete-upload), makes one the default or not, and
  // deletes one (a second click confirms). The upload target is reached
  // beside the API's other paths (so that it works behind a path prefix),
  // with the upload's token as its only credential. Names and
  // descriptions are the caller's text: shown as text, escaped.
  function showProfiles(tabs) {
    const info = el('p', { class: 'muted', id: 'profiles-info', text: 'loading…' });
    const body = el('tbody', { id: 'profile-items' });
    const name = el('input', { id: 'profile-name', placeholder: 'name', required: true, maxlength: 255 });
    const version = el('input', { id: 'profile-version', placeholder: 'Chromium version', value: 'unknown', maxlength: 64 });
    const file = el('input', { type: 'file', id: 'profile-file', accept: '.zip,.tar,.tgz,.gz,application/zip,application/x-tar,application/gzip', 'aria-label': 'Profile archive' });
    const err = el('p', { class: 'error', id: 'profile-error' });
    const upload = el('button', { type: 'submit', class: 'primary', id: 'profile-upload', text: 'Upload' });
    const form = el('form', { class: 'card', id: 'profile-form' }, el('h2', { text: 'Upload a profile' }),
      el('p', { class: 'muted small', text: 'A zip, tar or tar.gz of a Chromium user-data directory’s contents (Local State and Default/ at its top).' }),
      el('div', { class: 'row' }, name, version, file), err, el('div', { class: 'controls' }, upload));
    main.replaceChildren(el('div', { class: 'head' }, el('a', { href: '#/', text: '← sessions' }), el('h1', { class: 'plain', text: 'Manage' })), tabs,
      form, info, el('table', { class: 'sessions manage' }, el('thead', {}, el('tr', {}, ...['Name', 'Size', 'Default', 'Uses', 'Updated', ''].map((h) => el('th', { text: h })))), body));
    let stopped = false;
    cleanup.push(() => { stopped = true; });

    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      if (!name.value.trim()) { err.textContent = 'Name the profile.'; return; }
      if (!file.files.length) { err.textContent = 'Choose the profile’s archive.'; return; }
      upload.disabled = true;
      try {
        const init = await api('POST', 'browser-profiles/initiate-upload');
        const fd = new FormData();
        for (const [k, v] of Object.entries(init.upload_fields || {})) fd.append(k, v);
        fd.append('file', file.files[0]);
        const target = new URL('browser-profiles/' + encodeURIComponent(init.profile_id) + '/upload', PUBLIC_API);
        const r = await fetch(target, { method: 'POST', body: fd, credentials: 'omit' });
        if (!r.ok) {
          const text = await r.text();
          let data = null;
          try { data = JSON.parse(text); } catch { data = null; }
          throw new Error(detail(data, r.status));
        }
        try {
          await api('POST', 'browser-profiles/' + encodeURIComponent(init.profile_id) + '/complete-upload',
            { name: name.value, browser_name: 'chromium', browser_version: version.value || 'unknown' });
        } catch (e) {
          api('DELETE', 'browser-profiles/' + encodeURIComponent(init.profile_id)).catch(() => {});
          throw e;
        }
        name.value = '';
        file.value = '';
        toast('Uploaded');
        load();
      } catch (e) {
        err.textContent = visible('Not uploaded: ' + e.message);
      } finally { upload.disabled = false; }
    });

    function size(n) {
      if (typeof n !== 'number') return '';
      return n < 1024 ? n + ' B' : n < 1 << 20 ? (n / 1024).toFixed(1) + ' KiB' : (n / (1 << 20)).toFixed(1) + ' MiB';
    }

    async function load() {
      try {
        const res = await api('GET', 'browser-profiles?limit=100');
        if (stopped) return;
        const items = (res.profiles || []).filter((p) => p && typeof p.id === 'string');
        body.replaceChildren(...items.map((p) => {
          const base = 'browser-profiles/' + encodeURIComponent(p.id);
          const act = async (method, path, done) => {
            try { await api(method, base + path); toast(done); load(); } catch (e) { toast(e.message); }
          };
          return el('tr', { 'data-id': p.id, 'data-default': p.is_default ? '1' : '' },
            el('td', { class: 'profile-name', title: p.description || '', text: p.name }),
            el('td', { text: size(p.file_size_bytes) }), el('td', { text: p.is_default ? 'default' : '' }),
            el('td', { text: String(p.usage_count || 0) }), el('td', { text: p.updated_at ? age(p.updated_at) + ' ago' : '' }),
            el('td', {},
              el('button', { type: 'button', class: 'default', text: p.is_default ? 'Unset default' : 'Make default', on: { click: () => act(p.is_default ? 'DELETE' : 'PUT', '/default', p.is_default ? 'No longer the default' : 'Made the default') } }),
              el('button', { type: 'button', class: 'danger', text: 'Delete', on: { click: (ev) => {
                const b = ev.currentTarget;
                if (!b.dataset.armed) { b.dataset.armed = '1'; b.textContent = 'Delete? Click again'; return; }
                act('DELETE', '', 'Deleted');
              } } })));
        }));
        info.textContent = visible((res.total || 0) + (res.total === 1 ? ' browser profile' : ' browser profiles') + (res.total > items.length ? ', the first ' + items.length + ' shown' : ''));
      } catch (e) {
        if (stopped) return;
        body.replaceChildren();
        info.textContent = visible('Cannot list: ' + e.message);
      }
    }
    load();
  }

  function cell(v) {
    if (v && typeof v === 'object' && v.link) return el('td', {}, el('a', { href: v.link, text: v.text }));
    return el('td', { text: v === undefined || v === null ? '' : String(v) });
  }

  // jsonEditor is a textarea of JSON with a button; save receives the
  // parsed value and throws what the server said.
  function jsonEditor(id, value, label, save) {
    const area = el('textarea', { class: 'json', id, rows: Math.min(24, pretty(value).split('\n').length + 1), spellcheck: 'false' });
    area.value = pretty(value);
    const err = el('p', { class: 'error' });
    const btn = el('button', { type: 'submit', class: 'primary', text: label });
    const form = el('form', { class: 'editor' }, area, err, el('div', { class: 'controls' }, btn));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      let v;
      try { v = JSON.parse(area.value); } catch (e) { err.textContent = visible('Not JSON: ' + e.message); return; }
      btn.disabled = true;
      try { await save(v); } catch (e) { err.textContent = visible(e.message); }
      btn.disabled = false;
    });
    return form;
  }

  function showManage(kind) {
    const k = KINDS[kind] ? kind : 'agents';
    const spec = KINDS[k];
    const tabs = el('nav', { class: 'tabs', id: 'manage-tabs' }, ...Object.entries(KINDS).map(([key, s]) =>
      el('a', { href: '#/manage/' + key, class: key === k ? 'current' : '', 'data-kind': key, text: s.title })));
    if (spec.view) { spec.view(tabs); return; }
    const info = el('p', { class: 'muted', id: 'manage-info', text: 'loading…' });
    const body = el('tbody', { id: 'manage-items' });
    const out = el('div', { id: 'manage-detail' });
    const newBtn = el('button', { type: 'button', id: 'manage-new', text: 'New ' + spec.title.replace(/s$/, '').toLowerCase() });
    main.replaceChildren(el('div', { class: 'head' }, el('a', { href: '#/', text: '← sessions' }), el('h1', { class: 'plain', text: 'Manage' })), tabs,
      el('div', { class: 'controls' }, newBtn), info,
      el('table', { class: 'sessions manage' }, el('thead', {}, el('tr', {}, ...spec.cols.map((h) => el('th', { text: h })), el('th', {}))), body), out);
    let stopped = false;
    cleanup.push(() => { stopped = true; });

    newBtn.addEventListener('click', () => {
      out.replaceChildren(el('div', { class: 'card', id: 'manage-edit' }, el('h2', { text: 'New ' + spec.title.replace(/s$/, '').toLowerCase() }),
        jsonEditor('manage-json', spec.template, 'Create', async (v) => {
          const r = await api('POST', spec.path, v);
          out.replaceChildren(r && r.secret ? el('div', { class: 'card', id: 'manage-secret' },
            el('p', { text: 'Created. Its signing secret, shown this once:' }), el('pre', { text: r.secret })) : el('div'));
          toast('Created');
          load();
        })));
    });

    async function open(x) {
      const name = spec.key(x);
      const base = spec.path + '/' + itemPath(name);
      let full = x;
      try { full = await api('GET', base); } catch (e) { toast(e.message); return; }
      if (stopped) return;
      const parts = [el('h2', { text: spec.title.replace(/s$/, '') + ' ' + name })];
      if (full.read_only) {
        parts.push(el('p', { class: 'muted', text: 'Defined by the server’s configuration: read-only here.' }), el('pre', { text: pretty(full) }));
      } else {
        const buttons = [];
        for (const [label, method, suffix] of spec.actions ? spec.actions(full) : []) {
          buttons.push(el('button', { type: 'button', class: 'action', 'data-action': suffix.slice(1), text: label, on: { click: async () => {
            try {
              const r = await api(method, base + suffix);
              toast(label + ': done');
              await load();
              // The result goes into the detail as opened again: shown
              // before, it was replaced at once by the new detail (a
              // rotated secret, shown this once, with it).
              await open(full);
              const result = out.querySelector('#manage-result');
              if (result && r && r.secret) result.replaceChildren(el('p', { text: 'The new signing secret, shown this once:' }), el('pre', { text: r.secret }));
              else if (result && r && r.response_status !== undefined) result.replaceChildren(el('p', { text: 'The receiver answered HTTP ' + r.response_status }));
            } catch (e) { toast(label + ' failed: ' + e.message); }
          } } }));
        }
        buttons.push(el('button', { type: 'button', class: 'danger', id: 'manage-delete', text: 'Delete', on: { click: async (ev) => {
          // A second click confirms.
          const b = ev.currentTarget;
          if (!b.dataset.armed) { b.dataset.armed = '1'; b.textContent = 'Delete ' + name + '? Click again'; return; }
          try { await api('DELETE', base); out.replaceChildren(); toast('Deleted'); load(); } catch (e) { toast('Delete failed: ' + e.message); }
        } } }));
        parts.push(el('div', { class: 'controls' }, ...buttons), el('div', { id: 'manage-result' }),
          jsonEditor('manage-json', spec.editable ? spec.editable(full) : full, 'Save', async (v) => {
            await api(spec.replace, base, v);
            toast('Saved');
            load();
          }));
      }
      if (spec.sub) {
        const subBody = el('tbody', { id: 'manage-sub' });
        const subInfo = el('p', { class: 'muted' });
        parts.push(el('h3', { text: spec.sub.title }), el('table', { class: 'sessions sub' },
          el('thead', {}, el('tr', {}, ...spec.sub.cols.map((h) => el('th', { text: h })))), subBody), subInfo);
        api('GET', base + spec.sub.path).then((p) => {
          const items = p.items || [];
          subBody.replaceChildren(...items.map((d) => el('tr', {}, ...spec.sub.row(d).map(cell))));
          subInfo.textContent = visible(items.length ? (p.total > items.length ? 'the latest ' + items.length + ' of ' + p.total : '') : 'none yet');
        }).catch((e) => { subInfo.textContent = visible(e.message); });
      }
      out.replaceChildren(el('div', { class: 'card', id: 'manage-edit', 'data-name': name }, ...parts));
    }

    async function load() {
      try {
        const res = await api('GET', spec.path + '?size=100');
        if (stopped) return;
        const items = (res.items || []).filter((x) => x && spec.key(x) !== undefined);
        body.replaceChildren(...items.map((x) => el('tr', { 'data-name': spec.key(x) },
          ...spec.row(x).map(cell),
          el('td', {}, el('button', { type: 'button', class: 'open', text: x.read_only ? 'View' : 'Edit', on: { click: () => open(x) } })))));
        info.textContent = visible((res.total || 0) + ' ' + (res.total === 1 ? spec.title.replace(/s$/, '') : spec.title).toLowerCase() + (res.total > items.length ? ', the first ' + items.length + ' shown' : ''));
      } catch (e) {
        if (stopped) return;
        body.replaceChildren();
        newBtn.disabled = /not enabled|Not Found|HTTP 404|HTTP 501/i.test(e.message);
        info.textContent = visible(newBtn.disabled ? spec.title + ' are not enabled on this server (' + e.message + ').' : 'Cannot list: ' + e.message);
      }
    }
    load();
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
    const r = await fetch(new URL(path, PUBLIC_API), { credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer' });
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
      const cards = pendingCards(as, () => false, null);
      pending.replaceChildren(...(cards.length ? [el('h2', { text: 'Waiting for the owner' }), ...cards] : []));
    }, (d) => { metrics = d; });
    const streamInfo = el('p', { class: 'muted', id: 'stream-info', text: 'loading…' });
    main.replaceChildren(el('div', { class: 'head' }, title, badge), info, usageLine,
      el('details', { class: 'request' }, el('summary', { text: 'request' }), request),
      pending, tv.planBox,
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
    document.getElementById('keyless').hidden = authRequired;
    const m = h.match(/^\/s\/([^/?]+)$/);
    const mg = h.match(/^\/manage(?:\/([a-z]+))?$/);
    if (m) showSession(decodeURIComponent(m[1]));
    else if (mg) showManage(mg[1] || 'agents');
    else showList();
  }

  document.getElementById('logout').addEventListener('click', () => { loggedIn = false; logout(); });
  window.addEventListener('hashchange', route);
  const origLogin = showLogin;
  showLogin = (msg) => { loggedIn = false; origLogin(msg); };
  route();
})();
