// durable phone --web: the page (crates/durable-cli/web). It shows a
// durable agent the way Collie's phone does (docs/wire.md §3-§10), through
// the CLI's proxy: `wire/<path>` reaches the agent's `/<path>` (the CLI
// adds the token; the page never has it), `about` says where the agent is.
// Every URL is relative, so the secret stays in the path.
//
// Decisions written down here (and in the docs):
// - UNTRUSTED TEXT. Everything the agent sends (titles, items, labels, card
//   words, reasons, refusal messages) reaches the page only through
//   `textContent`, `createTextNode`, attribute setters of inert attributes
//   (`data-*`, `placeholder`, `value`, `title`) or `<option>` text. No
//   `innerHTML`, `outerHTML`, `insertAdjacentHTML` or `document.write`
//   anywhere in this file. The page is served with a strict CSP (no inline
//   script, no inline style) as a second wall.
// - CONTROL AND BIDI CHARACTERS never reach the page: every text shown is
//   cleaned first (`clean`, `cleanBody`: the terminal phone's rule), so an
//   agent cannot reverse or hide a card's words (U+202E, ESC, C1…).
// - MARKDOWN is not rendered: a `markdown` item is shown as its text with
//   its line breaks kept (CSS `white-space: pre-wrap`), exactly like a
//   `reply`. No parser, so no sanitizer to trust.
// - LINKS: a `link` item becomes an `<a>` only when its `href` parses as an
//   absolute `https:` or `http:` URL (the wire's rule, §6.1); anything else
//   (`javascript:`, `data:`, relative) is shown as plain text. Links open in
//   a new tab with `rel="noopener noreferrer"`.
// - Polling as Collie: `GET /v1/state` every 2 s while the page is visible,
//   10 s while hidden, with `since` and `If-None-Match` (§5); the open
//   chat's events `after` what it has (§6). Every write carries a fresh
//   request id (§9).

'use strict';

(function () {
  const WIRE = { min: 1, max: 1 };
  const VISIBLE_MS = 2000;
  const HIDDEN_MS = 10000;
  const HISTORY_PAGE = 50;
  const SKIPPED = 'Older messages were skipped: the durable agent no longer keeps them.';
  const ICONS = {
    play: ['M7 4l13 8-13 8z'],
    pause: ['M7 4v16', 'M17 4v16'],
    check: ['M4 12l5 5L20 6'],
    x: ['M5 5l14 14', 'M19 5L5 19'],
    refresh: ['M20 11a8 8 0 1 0-2.3 5.7', 'M20 4v7h-7'],
    archive: ['M3 5h18v4H3z', 'M5 9v10h14V9', 'M10 13h4'],
    flag: ['M5 21V4', 'M5 4h12l-2 4 2 4H5'],
    star: ['M12 3l2.8 5.8 6.2.9-4.5 4.4 1 6.2L12 17.4 6.5 20.3l1-6.2L3 9.7l6.2-.9z'],
    send: ['M3 11l18-8-8 18-2-8z'],
    note: ['M5 3h10l4 4v14H5z', 'M9 12h6', 'M9 16h6'],
    search: ['M11 4a7 7 0 1 0 0 14a7 7 0 1 0 0-14', 'M16 16l5 5'],
    more: ['M5 12h.01', 'M12 12h.01', 'M19 12h.01'],
  };

  // ---- state ----------------------------------------------------------

  const S = {
    about: null, // {target, transport, cli}
    hello: null, // GET /hello
    helloTrouble: null, // a sentence when hello failed
    incompatible: null, // Collie's sentence
    trouble: null, // the last poll's trouble, a sentence
    troubleKind: null, // 'unreachable' | 'token' | 'other'
    epoch: null,
    seq: 0,
    etag: null,
    ready: false,
    workspaces: [],
    panes: [],
    closed: [],
    starters: [],
    asks: [],
    view: null, // {pane, next, items: [], dropped}
    history: { rows: [], next: null, loaded: false, loading: false },
    // Keyed by the agent's ids: objects without a prototype, so an id such
    // as `__proto__` or `constructor` is a key like any other.
    lines: Object.create(null), // ask id -> the line its card left
    cardNotes: Object.create(null), // ask id -> {text, bad}
    drafts: Object.create(null), // ask id -> draft of its answer
    pendingAlways: Object.create(null), // ask id -> {option, hash, at}: the first tap of an allow-always
    changedAsks: Object.create(null), // ask id -> the ask as it is now (409 hash-mismatch)
    result: null, // {text, bad, askId}
    renaming: false,
    closing: false,
    timer: null,
    polling: false,
  };

  // ---- small helpers --------------------------------------------------

  // Characters that draw nothing or reorder text: C0 and C1 controls and
  // the invisible set of the terminal phone's `clean` (phone/draw.rs, the
  // agent's own set, wire §6.1). An agent could hide or reverse words
  // with them (U+202E) and make a card say what it does not.
  const HIDDEN = /[\u0000-\u001F\u007F-\u009F\u00AD\u034F\u061C\u115F\u1160\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB\u{E0000}-\u{E007F}]/gu;

  // One line of the agent's text, safe to show: as `clean` in draw.rs, a
  // tab or a line break is a space, and every hidden character goes.
  function clean(text) {
    return String(text).replace(/[\t\n\r]/g, ' ').replace(HIDDEN, '');
  }

  // Body text (a reply, a reason, code): its lines kept, each cleaned, a
  // tab four spaces (draw.rs's `clean_lines`).
  function cleanBody(text) {
    return String(text).split('\n').map((l) => clean(l.replace(/\t/g, '    '))).join('\n');
  }

  // A text node of body text, for `el`'s children.
  function bodyText(text) {
    return document.createTextNode(cleanBody(text));
  }

  // Attributes whose value the page shows.
  const SHOWN = ['placeholder', 'aria-label', 'title', 'alt'];

  // Every text `el` puts on the page is cleaned (`clean`, one line): a
  // text given as a node (`bodyText`) is cleaned by whoever made it.
  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const k of Object.keys(attrs)) {
        const v = attrs[k];
        if (v === undefined || v === null || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = clean(v);
        else if (k === 'onclick') e.addEventListener('click', v);
        else if (k === 'hidden') e.hidden = true;
        else if (SHOWN.includes(k)) e.setAttribute(k, clean(v));
        else e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const c of children || []) {
      if (c === null || c === undefined || c === false) continue;
      e.appendChild(typeof c === 'string' ? document.createTextNode(clean(c)) : c);
    }
    return e;
  }

  function str(v) {
    return typeof v === 'string' ? v : '';
  }

  function icon(name) {
    // Any name may come from the agent: only the table's own entries count.
    const paths = typeof name === 'string' && Object.prototype.hasOwnProperty.call(ICONS, name) ? ICONS[name] : null;
    if (!paths) return null;
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('class', 'icon');
    svg.setAttribute('aria-hidden', 'true');
    for (const d of paths) {
      const p = document.createElementNS(ns, 'path');
      p.setAttribute('d', d);
      svg.appendChild(p);
    }
    return svg;
  }

  function requestId() {
    if (window.crypto && typeof window.crypto.randomUUID === 'function') {
      return 'web-' + window.crypto.randomUUID();
    }
    const b = new Uint8Array(16);
    window.crypto.getRandomValues(b);
    return 'web-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  function enc(id) {
    return encodeURIComponent(id);
  }

  // An id as a segment of a wire path. The ids `.` and `..` are valid (the
  // ID rule) but a browser resolves such a segment away, `%2E` included:
  // the page writes them as a space (which no id holds) and the dots, and
  // the CLI's proxy turns exactly that segment back (proxy.rs, DOT_IDS).
  function seg(id) {
    return id === '.' || id === '..' ? '%20' + id : enc(id);
  }

  function has(cap) {
    return !!(S.hello && S.hello.caps && S.hello.caps[cap] === true);
  }

  function pane(id) {
    return S.panes.find((p) => p.id === id) || null;
  }

  function timeLeft(ms) {
    if (ms <= 0) return 'expired';
    const s = Math.ceil(ms / 1000);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const r = s % 60;
    if (h === 0 && m === 0) return r + 's';
    if (h === 0) return m + 'm ' + String(r).padStart(2, '0') + 's';
    return h + 'h ' + String(m).padStart(2, '0') + 'm';
  }

  function incompatible(agent) {
    return (
      'durable-hello: incompatible: the durable agent speaks ' +
      agent.min + '..' + agent.max + ', this Collie speaks ' + WIRE.min + '..' + WIRE.max
    );
  }

  // ---- the wire, through the proxy -------------------------------------

  // {status, json, etag, ok}; a network failure is status 0.
  async function call(method, path, body, headers) {
    const init = { method, cache: 'no-store', credentials: 'same-origin', headers: {} };
    if (headers) Object.assign(init.headers, headers);
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let r;
    try {
      r = await fetch(path, init);
    } catch (e) {
      return { status: 0, json: null, etag: null, error: 'the durable phone (the CLI) does not answer: ' + e.message };
    }
    let json = null;
    if (r.status !== 304) {
      try {
        json = await r.json();
      } catch (e) {
        json = null;
      }
    }
    return { status: r.status, json, etag: r.headers.get('ETag') };
  }

  // A sentence for an answer that is not a success.
  function why(a) {
    if (a.status === 0) return { kind: 'unreachable', text: a.error };
    const v = a.json;
    if (a.status === 502 && v && v.code === 'unreachable') {
      return { kind: 'unreachable', text: 'Unreachable: ' + str(v.message) };
    }
    if (a.status === 401) {
      return { kind: 'token', text: 'The durable agent refused the token (401): check COLLIE_TOKEN.' };
    }
    if (v && v.ok === false) {
      return { kind: 'other', text: a.status + ' ' + str(v.code) + ': ' + str(v.message) };
    }
    return { kind: 'other', text: 'The agent answered ' + a.status + ' without the expected JSON.' };
  }

  async function loadAbout() {
    const a = await call('GET', 'about');
    if (a.status === 200 && a.json) S.about = a.json;
  }

  async function loadHello() {
    const a = await call('GET', 'wire/hello');
    if (a.status !== 200 || !a.json || a.json.ok !== true) {
      const w = why(a);
      S.helloTrouble = w;
      return false;
    }
    const h = a.json;
    if (!h.wire || typeof h.wire.min !== 'number' || typeof h.wire.max !== 'number' || typeof h.caps !== 'object') {
      S.helloTrouble = { kind: 'other', text: 'hello: a bad answer from the agent' };
      return false;
    }
    S.hello = h;
    S.helloTrouble = null;
    S.incompatible = h.wire.max < WIRE.min || h.wire.min > WIRE.max ? incompatible(h.wire) : null;
    // Collie introduces itself once per agent start (§3).
    const intro = await call('POST', 'wire/hello', { wire: WIRE, collie: { version: 'durable-web-phone' } });
    if (!S.incompatible && intro.json && intro.json.compatible === false) {
      const w = intro.json.wire;
      S.incompatible = w && typeof w.min === 'number' ? incompatible(w) : 'durable-hello: incompatible';
    }
    return true;
  }

  function applyState(v, etag) {
    if (!v || v.ok !== true || typeof v.epoch !== 'string' || typeof v.seq !== 'number' || !Array.isArray(v.panes) || !Array.isArray(v.asks)) {
      throw new Error('state: a bad answer from the agent');
    }
    const restarted = S.epoch !== null && S.epoch !== v.epoch;
    if (restarted && !v.full) {
      // Sequences start over with a new epoch (§3): read everything again.
      S.epoch = null;
      S.seq = 0;
      S.etag = null;
      return 'again';
    }
    if (restarted) {
      if (S.view) S.view = { pane: S.view.pane, next: null, items: [], dropped: false };
      S.history.loaded = false;
    }
    if (v.full) {
      S.panes = v.panes.slice();
    } else {
      for (const p of v.panes) {
        const i = S.panes.findIndex((x) => x.id === p.id);
        if (i >= 0) S.panes[i] = p;
        else S.panes.push(p);
      }
      const removed = Array.isArray(v.removed) ? v.removed : [];
      S.panes = S.panes.filter((p) => !removed.includes(p.id));
    }
    if (Array.isArray(v.workspaces)) {
      S.workspaces = v.workspaces;
      S.closed = Array.isArray(v.closed) ? v.closed : [];
      S.starters = Array.isArray(v.starters) ? v.starters : [];
      const order = [];
      for (const w of S.workspaces) for (const t of w.tabs || []) for (const p of t.panes || []) order.push(p);
      const at = (id) => {
        const i = order.indexOf(id);
        return i < 0 ? Infinity : i;
      };
      S.panes.sort((a, b) => at(a.id) - at(b.id));
      S.history.loaded = false; // the closed list may have changed
    }
    // Cards that went away without an answer from here leave no line of
    // ours: the agent writes its own notice (timed out, stopped…).
    S.asks = v.asks;
    S.epoch = v.epoch;
    S.seq = v.seq;
    S.ready = v.ready === true;
    S.etag = etag || null;
    return 'ok';
  }

  function upsert(items, item) {
    if (!item || typeof item !== 'object') return;
    const i = typeof item.id === 'string' ? items.findIndex((x) => x.id === item.id) : -1;
    if (i >= 0) items[i] = item;
    else items.push(item);
  }

  async function readEvents() {
    const view = S.view;
    if (!view) return;
    const p = pane(view.pane);
    if (!p) return;
    if (view.next !== null && p.lastSeq === view.next) return;
    const after = view.next === null ? 0 : view.next;
    const a = await call('GET', 'wire/v1/panes/' + seg(view.pane) + '/events?after=' + after);
    if (S.view !== view) return;
    if (a.status !== 200 || !a.json || a.json.ok !== true) return;
    const v = a.json;
    if (v.pane !== view.pane) return;
    if (v.snapshot === true) {
      view.items = [];
      for (const item of v.items || []) upsert(view.items, item);
      view.dropped = v.dropped === true;
    } else {
      for (const e of v.events || []) {
        if (e && e.type === 'item') upsert(view.items, e.item);
      }
    }
    if (typeof v.next === 'number') view.next = v.next;
  }

  async function loadHistory(more) {
    if (!has('history') || S.history.loading) return;
    S.history.loading = true;
    try {
      let path = 'wire/v1/history?limit=' + HISTORY_PAGE;
      if (more && S.history.next) path += '&after=' + enc(S.history.next);
      const a = await call('GET', path);
      if (a.status === 200 && a.json && a.json.ok === true && Array.isArray(a.json.rows)) {
        S.history.rows = more ? S.history.rows.concat(a.json.rows) : a.json.rows;
        S.history.next = typeof a.json.next === 'string' ? a.json.next : null;
        S.history.loaded = true;
      }
    } finally {
      S.history.loading = false;
    }
  }

  async function poll() {
    if (S.polling) {
      // A write asked for a poll while one runs: another right after it.
      S.again = true;
      return;
    }
    S.polling = true;
    try {
      if (!S.about) await loadAbout();
      if (!S.hello) {
        if (!(await loadHello())) {
          S.trouble = S.helloTrouble.text;
          S.troubleKind = S.helloTrouble.kind;
          return;
        }
      }
      if (S.incompatible) {
        S.trouble = null;
        return;
      }
      for (let round = 0; round < 2; round++) {
        const path = S.epoch !== null && S.seq > 0 ? 'wire/v1/state?since=' + S.seq : 'wire/v1/state';
        const headers = S.etag ? { 'If-None-Match': S.etag } : undefined;
        const a = await call('GET', path, undefined, headers);
        if (a.status === 304) {
          S.trouble = null;
          break;
        }
        if (a.status !== 200) {
          const w = why(a);
          S.trouble = w.text;
          S.troubleKind = w.kind;
          if (w.kind === 'token') S.hello = null;
          return;
        }
        try {
          const done = applyState(a.json, a.etag);
          S.trouble = null;
          if (done !== 'again') break;
        } catch (e) {
          S.trouble = e.message;
          S.troubleKind = 'other';
          return;
        }
      }
      await readEvents();
      const r = route();
      if (r.screen === 'home' && !S.history.loaded) await loadHistory(false);
    } finally {
      S.polling = false;
      render();
      if (S.again) {
        S.again = false;
        schedule(0);
      }
    }
  }

  function schedule(ms) {
    if (S.timer) clearTimeout(S.timer);
    const wait = ms !== undefined ? ms : document.visibilityState === 'hidden' ? HIDDEN_MS : VISIBLE_MS;
    S.timer = setTimeout(tick, wait);
  }

  async function tick() {
    S.timer = null;
    try {
      await poll();
    } catch (e) {
      // Whatever the agent sent, the phone keeps polling.
      if (window.console) console.error('durable phone: a poll failed', e);
    } finally {
      if (S.timer === null) schedule();
    }
  }

  // A write (§8): a fresh request id; the answer; then a poll.
  async function write(path, body) {
    const b = Object.assign({}, body || {}, { requestId: requestId() });
    const a = await call('POST', 'wire/' + path, b);
    schedule(0);
    return a;
  }

  // ---- routes -----------------------------------------------------------

  function route() {
    const h = location.hash || '';
    const decoded = (t) => {
      try {
        return decodeURIComponent(t);
      } catch (e) {
        return null; // a hash that is not percent-encoding goes home
      }
    };
    let m = /^#\/pane\/(.+)$/.exec(h);
    if (m && decoded(m[1]) !== null) return { screen: 'pane', id: decoded(m[1]) };
    m = /^#\/history\/(.+)$/.exec(h);
    if (m && decoded(m[1]) !== null) return { screen: 'history', id: decoded(m[1]) };
    return { screen: 'home' };
  }

  function go(hash) {
    if (location.hash === hash) render();
    else location.hash = hash;
  }

  // ---- drawing ----------------------------------------------------------

  const app = () => document.getElementById('app');
  let lastScreen = null;

  // Where the keyboard's focus is, as a selector that finds it again once
  // the screen is drawn anew.
  function focusKey() {
    const a = document.activeElement;
    if (!a || a === document.body || !a.dataset || !a.dataset.test) return null;
    let sel = '[data-test="' + a.dataset.test + '"]';
    for (const k of ['pane', 'ask', 'option', 'session', 'starter', 'action', 'field']) {
      if (a.dataset[k] !== undefined) sel += '[data-' + k + '="' + CSS.escape(a.dataset[k]) + '"]';
    }
    return sel;
  }

  function render() {
    const key = focusKey();
    draw();
    const a = document.activeElement;
    if (key && (!a || a === document.body)) {
      const again = document.querySelector(key);
      if (again) again.focus();
    }
  }

  function draw() {
    const r = route();
    const key = r.screen + ':' + (r.id || '');
    if (key !== lastScreen) {
      lastScreen = key;
      S.result = null;
      S.renaming = false;
      S.closing = false;
      if (r.screen === 'pane') {
        S.view = { pane: r.id, next: null, items: [], dropped: false };
        schedule(0);
      } else {
        S.view = null;
      }
      if (r.screen === 'history') openHistory(r.id);
      if (r.screen === 'home') schedule(0);
      const root = app();
      root.textContent = '';
      root.appendChild(el('div', { id: 'top' }));
      root.appendChild(el('div', { id: 'screen', 'data-screen': r.screen }));
    }
    drawAgent();
    if (r.screen === 'home') drawHome();
    else if (r.screen === 'pane') drawPane(r.id);
    else drawHistory(r.id);
  }

  function replace(container, node) {
    container.textContent = '';
    if (node) container.appendChild(node);
  }

  function runsWhere() {
    if (!S.about) return null;
    const t = S.about.transport;
    if (t === 'socket') return 'runs here';
    const target = str(S.about.target);
    let host = '';
    try {
      host = new URL(target).hostname;
    } catch (e) {
      host = '';
    }
    if (host === '127.0.0.1' || host === 'localhost' || host === '[::1]' || host === '::1') return 'runs here';
    return 'runs elsewhere';
  }

  function drawAgent() {
    const top = document.getElementById('top');
    if (!top) return;
    const waiting = S.panes.filter((p) => Array.isArray(p.openAsks) && p.openAsks.length > 0).length;
    const name = S.hello ? str(S.hello.host) : S.about ? str(S.about.target) : 'durable agent';
    let status;
    let statusClass = 'muted';
    if (S.incompatible) {
      status = S.incompatible;
      statusClass = 'bad';
    } else if (S.trouble) {
      status = S.trouble;
      statusClass = 'bad';
    } else if (!S.hello || S.epoch === null) {
      status = 'connecting…';
    } else if (!S.ready || S.hello.ready === false && !S.ready) {
      status = 'starting';
    } else {
      status = 'ready';
    }
    const facts = [];
    if (S.hello && S.hello.runtime) facts.push(str(S.hello.runtime));
    const where = runsWhere();
    if (where) facts.push(where);
    const row = el('section', { class: 'agent', 'data-test': 'agent-row' }, [
      el('div', { class: 'row' }, [
        el('span', { class: 'agent-name grow', 'data-test': 'agent-name', text: name }),
        el('span', { class: 'badge experimental', 'data-test': 'agent-badge', text: 'Experimental' }),
      ]),
      el('div', { class: 'muted', 'data-test': 'agent-facts', text: facts.join(' · ') }),
      el('div', { class: statusClass, 'data-test': 'agent-status', 'data-kind': S.incompatible ? 'incompatible' : S.trouble ? S.troubleKind : status, text: status }),
      S.epoch !== null && !S.incompatible
        ? el('div', { class: 'row' }, [
            el('span', { 'data-test': 'agent-open', text: S.panes.length + ' open' }),
            waiting > 0 ? el('span', { class: 'attention', 'data-test': 'agent-waiting', text: waiting + ' waiting for you' }) : null,
          ])
        : null,
    ]);
    replace(top, row);
  }

  function paneButton(p) {
    const waiting = Array.isArray(p.openAsks) && p.openAsks.length > 0;
    const state = waiting ? 'waiting for you' : str(p.state);
    return el('li', null, [
      el(
        'button',
        {
          class: 'pane' + (waiting ? ' waiting' : ''),
          'data-test': 'pane-row',
          'data-pane': p.id,
          'data-waiting': waiting ? 'true' : 'false',
          onclick: () => go('#/pane/' + enc(p.id)),
        },
        [
          el('span', { class: 'title', text: str(p.title) }),
          el('span', { class: waiting ? 'attention' : 'muted', text: state }),
        ],
      ),
    ]);
  }

  function drawHome() {
    const screen = document.getElementById('screen');
    const out = el('div');
    if (S.epoch !== null && !S.incompatible) {
      const waiting = S.panes.filter((p) => Array.isArray(p.openAsks) && p.openAsks.length > 0);
      const others = S.panes.filter((p) => !(Array.isArray(p.openAsks) && p.openAsks.length > 0));
      const list = el('ul', { class: 'list', 'data-test': 'pane-list' });
      for (const p of waiting.concat(others)) list.appendChild(paneButton(p));
      out.appendChild(el('h2', { text: 'Conversations' }));
      if (S.panes.length === 0) out.appendChild(el('p', { class: 'muted', text: 'No open conversations.' }));
      out.appendChild(list);
      if (has('starters') && S.starters.length > 0) {
        const starters = el('div', { class: 'actions' });
        for (const s of S.starters) {
          starters.appendChild(
            el('button', { 'data-test': 'starter', 'data-starter': s.id, onclick: () => startIt(s.id) }, [str(s.label)]),
          );
        }
        out.appendChild(starters);
        out.appendChild(el('div', { class: 'result', 'data-test': 'send-result', text: S.result ? S.result.text : '' }));
      }
      drawClosed(out);
    }
    replace(screen, out);
  }

  function drawClosed(out) {
    const rows = [];
    const seen = new Set();
    if (has('history')) {
      for (const r of S.history.rows) {
        if (r && r.state === 'closed' && typeof r.id === 'string') {
          rows.push({ id: r.id, title: str(r.title), subtitle: str(r.subtitle), session: r.id });
          seen.add(r.id);
        }
      }
    }
    for (const c of S.closed) {
      if (seen.has(c.id) || (c.sessionId && seen.has(c.sessionId))) continue;
      rows.push({ id: c.id, title: str(c.title), subtitle: '', session: typeof c.sessionId === 'string' ? c.sessionId : null });
    }
    if (rows.length === 0 && !S.history.next) return;
    out.appendChild(el('h2', { text: 'Closed' }));
    const list = el('ul', { class: 'list', 'data-test': 'closed-list' });
    for (const r of rows) {
      const open = r.session && has('history') ? () => go('#/history/' + enc(r.session)) : null;
      list.appendChild(
        el('li', { class: 'closed-row' }, [
          el(
            'button',
            { class: 'pane', 'data-test': 'closed-row', 'data-session': r.session || r.id, disabled: !open, onclick: open || undefined },
            [el('span', { class: 'title', text: r.title }), r.subtitle ? el('span', { class: 'muted', text: r.subtitle }) : null],
          ),
          has('reopen')
            ? el('button', { 'data-test': 'reopen', 'data-pane': r.id, onclick: () => reopen(r.id) }, ['Reopen'])
            : null,
        ]),
      );
    }
    out.appendChild(list);
    if (S.history.next) {
      out.appendChild(el('button', { 'data-test': 'more', onclick: async () => { await loadHistory(true); render(); } }, ['More']));
    }
  }

  async function startIt(id) {
    const a = await write('v1/starters/' + seg(id), {});
    if (a.status === 200 && a.json && a.json.ok) {
      S.result = { text: 'started' };
      if (typeof a.json.pane === 'string') go('#/pane/' + enc(a.json.pane));
    } else {
      S.result = refusal(a);
    }
    render();
  }

  async function reopen(id) {
    const a = await write('v1/reopen', { id });
    S.result = a.status === 200 && a.json && a.json.ok ? { text: 'reopened' } : refusal(a);
    S.history.loaded = false;
    if (a.status === 200) {
      await poll();
      if (pane(id)) go('#/pane/' + enc(id));
    }
    render();
  }

  // The line for a refusal: the agent's reason when it gives one.
  function refusal(a) {
    const v = a.json;
    if (a.status === 0 || a.status === 502 || a.status === 401) return { text: why(a).text, bad: true };
    if (v && v.ok === false) {
      let text = 'refused: ' + (typeof v.reason === 'string' ? v.reason : str(v.message));
      if (v.code && v.code !== 'refused') text += ' (' + str(v.code) + ')';
      return { text, bad: true, askId: typeof v.askId === 'string' ? v.askId : null, code: str(v.code) };
    }
    return { text: 'the agent answered ' + a.status, bad: true };
  }

  // ---- a conversation ---------------------------------------------------

  function drawItem(item) {
    const kind = str(item.kind);
    const partial = item.partial === true;
    const attrs = { 'data-test': 'item', 'data-kind': kind, 'data-item': str(item.id) };
    if (partial) attrs['data-partial'] = 'true';
    const cls = 'item ' + kind + (partial ? ' partial' : '');
    switch (kind) {
      case 'user':
      case 'reply':
      case 'markdown':
      case 'thinking':
        return el('div', Object.assign({ class: cls }, attrs), [bodyText(str(item.text))]);
      case 'notice': {
        const tone = ['info', 'warn', 'error'].includes(item.tone) ? item.tone : 'info';
        attrs['data-tone'] = tone;
        return el('div', Object.assign({ class: cls + ' ' + tone }, attrs), [bodyText(str(item.text))]);
      }
      case 'code': {
        const lang = str(item.lang);
        attrs['data-lang'] = lang;
        return el('div', Object.assign({ class: cls }, attrs), [
          lang ? el('span', { class: 'label', text: lang }) : null,
          el('pre', null, [el('code', null, [bodyText(str(item.text))])]),
        ]);
      }
      case 'tool': {
        const status = str(item.status);
        attrs['data-status'] = status;
        return el('div', Object.assign({ class: cls }, attrs), [
          el('div', { class: 'row' }, [
            el('span', { class: 'mono grow', text: str(item.call) || str(item.name) }),
            el('span', { class: 'status-' + status, text: status }),
            badge(item.badge),
          ]),
          typeof item.output === 'string' ? el('pre', null, [bodyText(item.output)]) : null,
        ]);
      }
      case 'link': {
        const href = safeHref(item.href);
        const text = str(item.text) || str(item.href);
        return el('div', Object.assign({ class: cls }, attrs), [
          href ? el('a', { href, rel: 'noopener noreferrer', target: '_blank', text }) : text,
        ]);
      }
      case 'progress': {
        const value = typeof item.value === 'number' && isFinite(item.value) ? Math.min(1, Math.max(0, item.value)) : 0;
        const bar = el('progress', { max: '1' });
        bar.value = value;
        return el('div', Object.assign({ class: cls }, attrs), [
          el('div', { class: 'row' }, [
            el('span', { class: 'grow', text: str(item.label) }),
            el('span', { class: 'muted', text: Math.round(value * 100) + '%' }),
            badge(item.badge),
          ]),
          bar,
        ]);
      }
      default:
        return el('div', Object.assign({ class: 'item notice' }, attrs), ['(an item this phone does not draw)']);
    }
  }

  function badge(b) {
    if (!b || typeof b !== 'object' || typeof b.text !== 'string') return null;
    const tone = ['neutral', 'good', 'warn', 'bad'].includes(b.tone) ? b.tone : 'neutral';
    return el('span', { class: 'badge ' + tone, 'data-test': 'badge', 'data-tone': tone, text: b.text });
  }

  function safeHref(href) {
    if (typeof href !== 'string') return null;
    let u;
    try {
      u = new URL(href);
    } catch (e) {
      return null;
    }
    if (u.protocol !== 'https:' && u.protocol !== 'http:') return null;
    if (!/^https?:\/\//i.test(href)) return null;
    return u.href;
  }

  function itemKey(item, n) {
    return typeof item.id === 'string' ? 'i:' + item.id : '#' + n;
  }

  // The lines left by the cards answered here in a pane, each where the
  // chat was when it was answered: {after: an item's key or null, ask, text}.
  function cardLines(paneId) {
    const open = new Set(S.asks.filter((a) => a && a.pane === paneId).map((a) => a.id));
    return Object.keys(S.lines)
      .filter((id) => S.lines[id].pane === paneId && !open.has(id))
      .map((id) => ({ after: S.lines[id].after, ask: id, text: S.lines[id].text }));
  }

  // The chat's items, drawn anew only where they changed (a partial text
  // grows in place), with `lines` after the items they follow (first when
  // they follow none, last when theirs is gone).
  function syncItems(container, items, dropped, lines) {
    const want = [];
    const left = (lines || []).slice();
    const lineAt = (after) => {
      for (let i = 0; i < left.length; ) {
        if (after === undefined || left[i].after === after) {
          const l = left.splice(i, 1)[0];
          want.push({ key: 'l:' + l.ask, json: l.text, make: () => el('div', { class: 'card-line', 'data-test': 'card-line', 'data-ask': l.ask, text: l.text }) });
        } else i++;
      }
    };
    if (dropped) want.push({ key: '#skipped', json: '', make: () => el('div', { class: 'skipped', 'data-test': 'skipped', text: SKIPPED }) });
    lineAt(null);
    items.forEach((item, n) => {
      const key = itemKey(item, n);
      want.push({ key, json: JSON.stringify(item), make: () => drawItem(item) });
      lineAt(key);
    });
    lineAt(undefined);
    const have = new Map();
    for (const child of Array.from(container.children)) have.set(child.dataset.key, child);
    let prev = null;
    for (const w of want) {
      let node = have.get(w.key);
      if (!node || node.dataset.json !== w.json) {
        const fresh = w.make();
        fresh.dataset.key = w.key;
        fresh.dataset.json = w.json;
        if (node) container.replaceChild(fresh, node);
        node = fresh;
      }
      have.delete(w.key);
      const at = prev ? prev.nextSibling : container.firstChild;
      if (at !== node) container.insertBefore(node, at);
      prev = node;
    }
    for (const gone of have.values()) gone.remove();
  }

  function drawPane(id) {
    const screen = document.getElementById('screen');
    const p = pane(id);
    if (!screen.firstChild || screen.dataset.pane !== id) {
      screen.dataset.pane = id;
      screen.textContent = '';
      screen.appendChild(el('div', { 'data-test': 'chat', 'data-pane': id }, [
        el('div', { id: 'head' }),
        el('div', { id: 'actions' }),
        el('div', { id: 'items', class: 'items' }),
        el('div', { id: 'cards' }),
        el('div', { id: 'composer', class: 'composer' }),
      ]));
      drawComposer(id);
    }
    drawHead(id, p);
    drawActions(id, p);
    const items = document.getElementById('items');
    syncItems(items, S.view && S.view.pane === id ? S.view.items : [], S.view && S.view.dropped, cardLines(id));
    drawCards(id);
    updateComposer(id, p);
  }

  function drawHead(id, p) {
    const head = document.getElementById('head');
    const waiting = p && Array.isArray(p.openAsks) && p.openAsks.length > 0;
    const state = !p ? (S.epoch === null ? '' : 'closed') : waiting ? 'waiting for you' : str(p.state);
    const nodes = [
      el('header', { class: 'chat-head' }, [
        el('button', { 'data-test': 'back', 'aria-label': 'Back to the conversations', onclick: () => go('#/') }, ['‹']),
        el('div', { class: 'grow' }, [
          el('div', { class: 'title', 'data-test': 'chat-title', text: p ? str(p.title) : id }),
          el('div', { class: waiting ? 'attention' : 'muted', 'data-test': 'chat-state', text: state }),
        ]),
      ]),
    ];
    const keep = head.querySelector('[data-test=rename-input]');
    if (keep && S.renaming) return updateHeadText(head, p, state, waiting);
    const tools = el('div', { class: 'actions' });
    if (p && has('rename')) {
      if (S.renaming) {
        const input = el('input', { type: 'text', 'data-test': 'rename-input', 'aria-label': 'New title', maxlength: '256' });
        input.value = clean(str(p.title));
        const save = async () => {
          const title = input.value;
          const a = await write('v1/rename', { target: 'pane', id, title });
          S.result = a.status === 200 && a.json && a.json.ok ? { text: 'renamed' } : refusal(a);
          if (a.status === 200) S.renaming = false;
          render();
        };
        input.addEventListener('keydown', (e) => {
          if (e.key === 'Enter') { e.preventDefault(); save(); }
          if (e.key === 'Escape') { S.renaming = false; render(); }
        });
        tools.appendChild(input);
        tools.appendChild(el('button', { class: 'primary', 'data-test': 'rename-save', onclick: save }, ['Save']));
        tools.appendChild(el('button', { 'data-test': 'rename-cancel', onclick: () => { S.renaming = false; render(); } }, ['Cancel']));
        nodes.push(tools);
        replace(head, null);
        for (const n of nodes) head.appendChild(n);
        input.focus();
        return;
      }
      tools.appendChild(el('button', { 'data-test': 'rename', onclick: () => { S.renaming = true; render(); } }, ['Rename']));
    }
    if (p && has('close')) {
      if (S.closing) {
        tools.appendChild(el('button', { class: 'danger', 'data-test': 'close-confirm', onclick: () => closeIt(id) }, ['Close it: the agent ends it']));
        tools.appendChild(el('button', { 'data-test': 'close-cancel', onclick: () => { S.closing = false; render(); } }, ['Keep']));
      } else {
        tools.appendChild(el('button', { 'data-test': 'close', onclick: () => { S.closing = true; render(); } }, ['Close']));
      }
    }
    if (tools.firstChild) nodes.push(tools);
    const focused = document.activeElement && head.contains(document.activeElement) ? document.activeElement.dataset.test : null;
    replace(head, null);
    for (const n of nodes) head.appendChild(n);
    if (focused) {
      const again = head.querySelector('[data-test="' + focused + '"]');
      if (again) again.focus();
    }
  }

  function updateHeadText(head, p, state, waiting) {
    const t = head.querySelector('[data-test=chat-title]');
    if (t && p) t.textContent = clean(str(p.title));
    const s = head.querySelector('[data-test=chat-state]');
    if (s) {
      s.textContent = clean(state);
      s.className = waiting ? 'attention' : 'muted';
    }
  }

  async function closeIt(id) {
    const a = await write('v1/close', { target: 'pane', id });
    S.closing = false;
    if (a.status === 200 && a.json && a.json.ok) {
      S.history.loaded = false;
      go('#/');
    } else {
      S.result = refusal(a);
      render();
    }
  }

  function drawActions(id, p) {
    const box = document.getElementById('actions');
    const actions = p && has('actions') && Array.isArray(p.actions) ? p.actions : [];
    const sig = JSON.stringify(actions);
    if (box.dataset.sig === sig) return;
    box.dataset.sig = sig;
    const row = el('div', { class: 'actions' });
    for (const a of actions) {
      row.appendChild(
        el('button', { 'data-test': 'action', 'data-action': a.id, onclick: () => action(id, a.id) }, [icon(a.icon), str(a.label)]),
      );
    }
    replace(box, actions.length ? row : null);
  }

  async function action(paneId, actionId) {
    const a = await write('v1/panes/' + seg(paneId) + '/actions/' + seg(actionId), {});
    S.result = a.status === 200 && a.json && a.json.ok ? { text: 'done' } : refusal(a);
    render();
  }

  // ---- the composer -----------------------------------------------------

  function drawComposer(id) {
    const box = document.getElementById('composer');
    const text = el('textarea', { 'data-test': 'composer', rows: '2', placeholder: 'Message', 'aria-label': 'Message' });
    const send = el('button', { class: 'primary', 'data-test': 'send' }, [icon('send'), 'Send']);
    const steer = el('button', { 'data-test': 'steer' }, ['Steer']);
    const stop = el('button', { class: 'danger', 'data-test': 'stop' }, ['Stop']);
    const result = el('div', { class: 'result', 'data-test': 'send-result', role: 'status' });
    const doSend = async () => {
      const t = text.value;
      if (t.trim() === '') return;
      const p = pane(id);
      const body = { text: t };
      if (p) body.turnId = p.turnId === undefined ? null : p.turnId;
      const a = await write('v1/panes/' + seg(id) + '/send', body);
      if (a.status === 200 && a.json && a.json.ok) {
        text.value = '';
        S.result = { text: a.json.result === 'queued' ? 'queued: it goes after the running turn' : 'sent' };
      } else {
        S.result = refusal(a);
      }
      render();
    };
    const doSteer = async () => {
      const t = text.value;
      if (t.trim() === '') return;
      const a = await write('v1/panes/' + seg(id) + '/steer', { text: t });
      if (a.status === 200 && a.json && a.json.ok) {
        text.value = '';
        S.result = { text: 'steered' };
      } else {
        S.result = refusal(a);
      }
      render();
    };
    const doStop = async () => {
      const a = await write('v1/panes/' + seg(id) + '/stop', {});
      S.result = a.status === 200 && a.json && a.json.ok ? { text: 'stopped' } : refusal(a);
      render();
    };
    send.addEventListener('click', doSend);
    steer.addEventListener('click', doSteer);
    stop.addEventListener('click', doStop);
    text.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        doSend();
      }
    });
    box.appendChild(text);
    box.appendChild(el('div', { class: 'actions' }, [send, steer, stop]));
    box.appendChild(result);
    box.appendChild(el('div', { id: 'result-extra' }));
  }

  function updateComposer(id, p) {
    const box = document.getElementById('composer');
    if (!box) return;
    const q = (t) => box.querySelector('[data-test=' + t + ']');
    const working = p && p.state === 'working';
    q('composer').hidden = !has('send') && !has('steer');
    q('composer').disabled = !p;
    q('send').hidden = !has('send');
    q('steer').hidden = !has('steer');
    q('steer').disabled = !working;
    q('stop').hidden = !has('abort');
    q('send').disabled = !p;
    q('stop').disabled = !p;
    const result = q('send-result');
    const r = S.result;
    result.textContent = r ? clean(r.text) : '';
    result.className = 'result' + (r && r.bad ? ' bad' : '');
    const extra = document.getElementById('result-extra');
    const askId = r && r.askId && S.asks.some((a) => a.id === r.askId) ? r.askId : null;
    if ((extra.dataset.ask || '') !== (askId || '')) {
      extra.dataset.ask = askId || '';
      replace(extra, askId ? el('button', { 'data-test': 'show-card', 'data-ask': askId, onclick: () => showCard(askId) }, ['Show the question']) : null);
    }
  }

  function showCard(askId) {
    const card = document.querySelector('[data-test=card][data-ask="' + CSS.escape(askId) + '"]');
    if (!card) return;
    card.scrollIntoView({ block: 'center' });
    const first = card.querySelector('button, input, select, textarea');
    if (first) first.focus();
  }

  // ---- cards --------------------------------------------------------------

  function drawCards(paneId) {
    const box = document.getElementById('cards');
    // A question that changed (409) shows as it is now, even while a poll
    // that left before the answer still brings the old one.
    const asks = S.asks.filter((a) => a && a.pane === paneId).map((a) => {
      const changed = S.changedAsks[a.id];
      if (changed && changed.stale === a.hash) return changed.ask;
      if (changed && changed.ask.hash !== a.hash) delete S.changedAsks[a.id];
      return a;
    });
    const want = new Map(asks.map((a) => [a.id, a]));
    for (const node of Array.from(box.children)) {
      const a = want.get(node.dataset.ask);
      if (!a || node.dataset.sig !== cardSig(a)) node.remove();
    }
    for (const a of asks) {
      let node = box.querySelector('[data-test=card][data-ask="' + CSS.escape(a.id) + '"]');
      if (!node) {
        node = drawCard(a);
        box.appendChild(node);
      }
      updateCard(node, a);
    }
  }

  function cardSig(a) {
    return str(a.hash) + '|' + (armed(a) || '');
  }

  function optionsOf(a) {
    const options = Array.isArray(a.options) ? a.options : [];
    // No allow-always on a cleaned ask or one without its tool (§7).
    return options.filter((o) => o && typeof o.id === 'string' && !(o.always === true && (a.cleaned === true || !a.tool)));
  }

  function drawCard(a) {
    const kind = str(a.kind);
    const host = S.hello ? str(S.hello.host) : 'The agent';
    const card = el('section', { class: 'card', 'data-test': 'card', 'data-ask': a.id, 'data-kind': kind });
    card.dataset.sig = cardSig(a);
    card.appendChild(el('div', { class: 'who', 'data-test': 'card-agent', text: host + ' asks' }));
    card.appendChild(el('div', { class: 'q', 'data-test': 'card-title', text: str(a.title) }));
    if (typeof a.reason === 'string') card.appendChild(el('div', { class: 'reason', 'data-test': 'card-reason' }, [bodyText(a.reason)]));
    if (a.tool && typeof a.tool === 'object') {
      const args = el('ul', { class: 'args mono' });
      for (const pair of Array.isArray(a.tool.args) ? a.tool.args : []) {
        if (Array.isArray(pair) && pair.length === 2) args.appendChild(el('li', { text: str(pair[0]) + ': ' + str(pair[1]) }));
      }
      card.appendChild(
        el('div', { class: 'tool', 'data-test': 'card-tool' }, [
          el('div', { class: 'mono', text: str(a.tool.call) }),
          args.firstChild ? args : null,
        ]),
      );
    }
    card.appendChild(el('div', { class: 'muted', 'data-test': 'card-time' }));
    const body = el('div');
    const draft = (S.drafts[a.id] = S.drafts[a.id] || Object.create(null));
    const submit = el('button', { class: 'primary', 'data-test': 'card-submit' }, ['Answer']);
    if (kind === 'choice') {
      const box = el('div', { class: 'options' });
      for (const o of optionsOf(a)) {
        const confirming = armed(a) === o.id;
        const cls = o.style === 'primary' ? 'primary' : o.style === 'danger' ? 'danger' : '';
        box.appendChild(
          el('button', { class: cls, 'data-test': 'option', 'data-option': o.id, 'data-always': o.always === true ? 'true' : null, onclick: () => pick(a, o) }, [
            confirming ? 'Confirm: ' + str(o.label) : str(o.label),
          ]),
        );
      }
      body.appendChild(box);
      const pendingId = armed(a);
      if (pendingId) {
        // The option's own words say what it lets through (an agent's
        // "always" may switch a mode, not just allow one tool): no guess.
        const option = optionsOf(a).find((o) => o.id === pendingId);
        const label = option ? str(option.label) : '';
        body.appendChild(
          el('div', { class: 'note attention', 'data-test': 'confirm-always', text: '\u201c' + label + '\u201d holds beyond this question. Tap it again to confirm.' }),
        );
      }
    } else if (kind === 'multi') {
      const options = optionsOf(a);
      const min = typeof a.min === 'number' ? a.min : 1;
      const max = typeof a.max === 'number' ? a.max : options.length;
      draft.picked = draft.picked || [];
      body.appendChild(el('div', { class: 'muted', text: 'Pick ' + (min === max ? min : min + ' to ' + max) }));
      const box = el('div', { class: 'options' });
      for (const o of options) {
        const b = el('button', { 'data-test': 'option', 'data-option': o.id, 'aria-pressed': draft.picked.includes(o.id) ? 'true' : 'false' }, [str(o.label)]);
        if (draft.picked.includes(o.id)) b.classList.add('picked');
        b.addEventListener('click', () => {
          const i = draft.picked.indexOf(o.id);
          if (i >= 0) draft.picked.splice(i, 1);
          else draft.picked.push(o.id);
          b.classList.toggle('picked', i < 0);
          b.setAttribute('aria-pressed', i < 0 ? 'true' : 'false');
        });
        box.appendChild(b);
      }
      body.appendChild(box);
      submit.addEventListener('click', () => send(a, { optionIds: options.filter((o) => draft.picked.includes(o.id)).map((o) => o.id) }));
      body.appendChild(submit);
    } else if (kind === 'text') {
      const input = a.multiline === true ? el('textarea', { rows: '3' }) : el('input', { type: 'text' });
      input.setAttribute('data-test', 'card-text');
      input.setAttribute('aria-label', clean(str(a.title)));
      if (typeof a.placeholder === 'string') input.placeholder = clean(a.placeholder);
      input.value = draft.text || '';
      input.addEventListener('input', () => { draft.text = input.value; });
      const answerIt = () => send(a, { text: input.value });
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && !(a.multiline === true && e.shiftKey) && !e.isComposing) { e.preventDefault(); answerIt(); }
      });
      submit.addEventListener('click', answerIt);
      body.appendChild(input);
      body.appendChild(submit);
    } else if (kind === 'form') {
      draft.values = draft.values || Object.create(null);
      const inputs = [];
      for (const f of Array.isArray(a.fields) ? a.fields : []) {
        if (!f || typeof f.id !== 'string') continue;
        const label = str(f.label) + (f.required === true ? ' *' : '');
        let input;
        if (f.type === 'bool') {
          input = el('input', { type: 'checkbox' });
          input.checked = draft.values[f.id] === true;
          input.addEventListener('change', () => { draft.values[f.id] = input.checked; });
          body.appendChild(el('label', null, [input, ' ', label]));
        } else if (f.type === 'select') {
          input = el('select');
          input.appendChild(el('option', { value: '', text: '—' }));
          for (const o of Array.isArray(f.options) ? f.options : []) {
            if (o && typeof o.id === 'string') input.appendChild(el('option', { value: o.id, text: str(o.label) }));
          }
          input.value = draft.values[f.id] || '';
          input.addEventListener('change', () => { draft.values[f.id] = input.value; });
          body.appendChild(el('label', null, [label, input]));
        } else {
          input = el('input', { type: f.type === 'number' ? 'number' : 'text', step: f.type === 'number' ? 'any' : null });
          input.value = draft.values[f.id] === undefined ? '' : String(draft.values[f.id]);
          input.addEventListener('input', () => { draft.values[f.id] = input.value; });
          input.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); submit.click(); } });
          body.appendChild(el('label', null, [label, input]));
        }
        input.setAttribute('data-test', 'field');
        input.setAttribute('data-field', f.id);
        inputs.push([f, input]);
      }
      submit.addEventListener('click', () => {
        const values = Object.create(null);
        for (const [f, input] of inputs) {
          if (f.type === 'bool') {
            if (input.checked || draft.values[f.id] === false) values[f.id] = input.checked;
          } else if (f.type === 'number') {
            if (input.value.trim() !== '') {
              const n = Number(input.value);
              if (!isFinite(n)) return note(a.id, f.label + ': not a number', true);
              values[f.id] = n;
            }
          } else if (input.value !== '') {
            values[f.id] = input.value;
          }
        }
        send(a, { values });
      });
      body.appendChild(submit);
    } else {
      body.appendChild(el('div', { class: 'muted', text: 'This phone cannot answer a question of this kind.' }));
    }
    card.appendChild(body);
    card.appendChild(el('div', { class: 'note', 'data-test': 'card-note' }));
    return card;
  }

  function note(askId, text, bad) {
    S.cardNotes[askId] = { text, bad: !!bad };
    render();
  }

  function updateCard(node, a) {
    const t = node.querySelector('[data-test=card-time]');
    const at = typeof a.expiresAt === 'string' ? Date.parse(a.expiresAt) : NaN;
    t.textContent = isNaN(at) ? '' : 'expires in ' + timeLeft(at - Date.now());
    const expired = !isNaN(at) && at <= Date.now();
    // Answers need the `asks` capability (§4).
    const closed = expired || !has('asks');
    for (const b of node.querySelectorAll('button, input, select, textarea')) b.disabled = closed;
    const n = node.querySelector('[data-test=card-note]');
    const msg = S.cardNotes[a.id];
    n.textContent = expired
      ? 'Expired: the agent closes it.'
      : !has('asks')
        ? 'This agent takes no answers from the phone.'
        : msg
          ? clean(msg.text)
          : '';
    n.className = 'note' + (expired || (msg && msg.bad) ? ' bad' : '');
  }

  // The option an allow-always's first tap armed on this ask as it is now
  // (a changed question is not armed), or null.
  function armed(a) {
    const p = S.pendingAlways[a.id];
    return p && p.hash === a.hash ? p.option : null;
  }

  // A second tap sooner than this after the first is the same gesture (a
  // double-click, a held Enter), not a choice made again.
  const SECOND_TAP_MS = 600;

  function pick(a, o) {
    if (o.always === true && armed(a) !== o.id) {
      // The second tap the seed asks for.
      S.pendingAlways[a.id] = { option: o.id, hash: a.hash, at: Date.now() };
      render();
      return;
    }
    if (o.always === true && Date.now() - S.pendingAlways[a.id].at < SECOND_TAP_MS) return;
    const confirm = o.always === true;
    delete S.pendingAlways[a.id];
    send(a, { optionIds: [o.id] }, confirm, [str(o.label)]);
  }

  function labelsOf(a, answer) {
    if (Array.isArray(answer.optionIds)) {
      const options = Array.isArray(a.options) ? a.options : [];
      return answer.optionIds.map((id) => {
        const o = options.find((x) => x.id === id);
        return o ? str(o.label) : id;
      });
    }
    if (typeof answer.text === 'string') return [answer.text];
    return null;
  }

  // The key of the last item the open chat of `paneId` shows, or null.
  function lastItem(paneId) {
    const items = S.view && S.view.pane === paneId ? S.view.items : [];
    return items.length ? itemKey(items[items.length - 1], items.length - 1) : null;
  }

  async function send(a, answer, confirmAlways) {
    const body = { answer, hash: a.hash, confirmAlways: !!confirmAlways };
    const r = await write('v1/asks/' + seg(a.id), body);
    const v = r.json;
    if ((r.status === 200 || r.status === 202) && v && v.ok) {
      const labels = labelsOf(a, answer);
      const what = labels ? labels.join(', ') : 'sent';
      S.lines[a.id] = { pane: a.pane, after: lastItem(a.pane), text: (r.status === 202 ? 'Answer held: ' : 'Answered: ') + what + ' — ' + str(a.title) };
      // What a button said before the card (`done`) is over.
      S.result = null;
      delete S.cardNotes[a.id];
      delete S.changedAsks[a.id];
      delete S.drafts[a.id];
      S.asks = S.asks.filter((x) => x.id !== a.id);
    } else if (r.status === 409 && v && v.code === 'hash-mismatch' && v.ask && typeof v.ask === 'object') {
      // The question changed: the card as it is now, the answer refused.
      S.changedAsks[a.id] = { ask: v.ask, stale: a.hash };
      S.cardNotes[a.id] = { text: 'The question changed: look at it again.', bad: true };
      delete S.drafts[a.id];
      const i = S.asks.findIndex((x) => x.id === a.id);
      if (i >= 0) S.asks[i] = v.ask;
    } else if (r.status === 409 && v && v.code === 'ask-closed') {
      S.lines[a.id] = { pane: a.pane, after: lastItem(a.pane), text: 'Already decided (' + str(v.decidedBy) + '): ' + str(a.title) };
      S.result = null;
      S.asks = S.asks.filter((x) => x.id !== a.id);
    } else if (r.status === 409 && v && v.code === 'confirm-required') {
      S.cardNotes[a.id] = { text: 'Tap it again to confirm.', bad: true };
    } else {
      S.cardNotes[a.id] = refusal(r);
    }
    render();
  }

  // ---- a closed conversation, read only from history (§10) ----------------

  const H = { id: null, row: null, items: [], next: null, dropped: false, trouble: null, loading: false };

  async function openHistory(id) {
    H.id = id;
    H.row = null;
    H.items = [];
    H.next = null;
    H.dropped = false;
    H.trouble = null;
    await historyPage(false);
  }

  async function historyPage(more) {
    if (H.loading) return;
    H.loading = true;
    const id = H.id;
    let path = 'wire/v1/history/' + seg(id) + '?limit=' + HISTORY_PAGE;
    if (more && H.next) path += '&after=' + enc(H.next);
    const a = await call('GET', path);
    H.loading = false;
    if (H.id !== id) return;
    if (a.status === 200 && a.json && a.json.ok === true) {
      H.row = a.json.row || H.row;
      for (const item of Array.isArray(a.json.items) ? a.json.items : []) upsert(H.items, item);
      H.next = typeof a.json.next === 'string' ? a.json.next : null;
      H.dropped = H.dropped || a.json.dropped === true;
    } else {
      H.trouble = refusal(a).text;
    }
    render();
  }

  function drawHistory(id) {
    const screen = document.getElementById('screen');
    if (!screen.firstChild || screen.dataset.session !== id) {
      screen.dataset.session = id;
      screen.textContent = '';
      screen.appendChild(el('div', { 'data-test': 'history', 'data-session': id }, [
        el('div', { id: 'hhead' }),
        el('div', { id: 'hitems', class: 'items' }),
        el('div', { id: 'hmore' }),
      ]));
    }
    const row = H.row || {};
    replace(document.getElementById('hhead'), el('header', { class: 'chat-head' }, [
      el('button', { 'data-test': 'back', 'aria-label': 'Back to the conversations', onclick: () => go('#/') }, ['‹']),
      el('div', { class: 'grow' }, [
        el('div', { class: 'title', 'data-test': 'chat-title', text: str(row.title) || id }),
        el('div', { class: 'muted', 'data-test': 'chat-state', text: (row.state === 'open' ? 'open' : 'closed') + ' · read only' }),
        H.trouble ? el('div', { class: 'bad', text: H.trouble }) : null,
      ]),
    ]));
    syncItems(document.getElementById('hitems'), H.id === id ? H.items : [], H.dropped);
    replace(document.getElementById('hmore'), H.next ? el('button', { 'data-test': 'more', onclick: () => historyPage(true) }, ['Older messages']) : null);
  }

  // ---- start ----------------------------------------------------------------

  document.addEventListener('visibilitychange', () => {
    schedule(document.visibilityState === 'visible' ? 0 : undefined);
  });
  window.addEventListener('hashchange', render);
  // The time left on cards.
  setInterval(() => {
    for (const node of document.querySelectorAll('[data-test=card]')) {
      const a = S.asks.find((x) => x.id === node.dataset.ask);
      if (a) updateCard(node, a);
    }
  }, 1000);
  render();
  schedule(0);
})();
