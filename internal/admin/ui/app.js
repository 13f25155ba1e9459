// latch status page: polls the admin API every second and redraws.
"use strict";

(() => {
  const REFRESH_MS = 1000;
  const LOCK_PAGE = 1000;

  const $ = (id) => document.getElementById(id);
  const state = {
    locks: [],
    more: false,
    sessions: [],
    cluster: null,
    stats: null,
    samples: [],
    seen: new Set(),
    search: "",
    sort: { locks: { col: "key", dir: 1 }, sessions: { col: "id", dir: 1 } },
  };

  // ---------- formatting ----------

  function fmtDuration(sec) {
    if (sec == null || !isFinite(sec)) return "–";
    if (sec <= 0) return "0";
    if (sec < 0.000001) return "<1µs";
    if (sec < 0.001) return Math.round(sec * 1e6) + "µs";
    if (sec < 1) return (sec * 1000).toFixed(sec < 0.01 ? 2 : sec < 0.1 ? 1 : 0) + "ms";
    if (sec < 60) return sec.toFixed(sec < 10 ? 1 : 0) + "s";
    const m = Math.floor(sec / 60), s = Math.floor(sec % 60);
    if (m < 60) return m + "m " + s + "s";
    const h = Math.floor(m / 60);
    if (h < 48) return h + "h " + (m % 60) + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }

  function fmtCount(n) {
    if (n == null) return "–";
    if (n < 10000) return String(n);
    if (n < 1e6) return (n / 1e3).toFixed(n < 1e5 ? 1 : 0) + "k";
    if (n < 1e9) return (n / 1e6).toFixed(n < 1e8 ? 1 : 0) + "M";
    return (n / 1e9).toFixed(1) + "G";
  }

  function fmtRate(r) {
    if (r == null) return "–";
    if (r >= 100) return fmtCount(Math.round(r));
    if (r >= 10) return r.toFixed(0);
    return r.toFixed(r === 0 ? 0 : 1);
  }

  // secondsUntil returns how far an RFC 3339 time is from the server's
  // "now" (the list's time), so that the page needs no synced clock.
  function secondsBetween(from, to) {
    return (Date.parse(to) - Date.parse(from)) / 1000;
  }

  // td makes a table cell: its content in one div, so that the phone
  // layout (label, then content) keeps several lines together.
  function td(attrs, ...children) {
    return el("td", attrs, el("div", { class: "cell" }, ...children));
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v == null || v === false) continue;
        if (k === "class") e.className = v;
        else if (k === "text") e.textContent = v;
        else e.setAttribute(k, v);
      }
    }
    for (const c of children) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // ---------- fetching ----------

  async function getJSON(url) {
    const res = await fetch(url, { cache: "no-store", headers: { Accept: "application/json" } });
    if (!res.ok) throw new Error(url + ": HTTP " + res.status);
    return res.json();
  }

  async function refresh() {
    try {
      const lastSample = state.samples.length ? state.samples[state.samples.length - 1].time : "";
      const [locks, sessions, stats, hist, cluster] = await Promise.all([
        getJSON("/v1/locks?limit=" + LOCK_PAGE),
        getJSON("/v1/sessions"),
        getJSON("/v1/stats"),
        getJSON("/v1/stats/history" + (lastSample ? "?since=" + encodeURIComponent(lastSample) : "")),
        getJSON("/v1/cluster").catch(() => null),
      ]);
      state.cluster = cluster;
      state.locks = locks.locks || [];
      state.more = !!locks.next;
      state.listTime = locks.time;
      state.sessions = sessions.sessions || [];
      state.sessionsTime = sessions.time;
      state.stats = stats;
      state.interval = hist.interval_seconds || 1;
      state.samples = state.samples.concat(hist.samples || []);
      const keep = Math.max(60, Math.round(300 / state.interval));
      if (state.samples.length > keep) state.samples = state.samples.slice(-keep);
      setConn(true);
      render();
    } catch (err) {
      setConn(false, err);
    }
  }

  function setConn(ok, err) {
    const c = $("conn");
    c.classList.toggle("live", ok);
    c.classList.toggle("down", !ok);
    $("conn-text").textContent = ok
      ? "live · " + new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" })
      : "disconnected";
    if (!ok && err) c.title = String(err.message || err);
    else c.removeAttribute("title");
  }

  // ---------- rendering ----------

  function render() {
    renderCluster();
    renderTiles();
    renderCharts();
    renderLocks();
    renderSessions();
  }

  // The cluster line: the mode, this node, the leader and each member's
  // state; hidden for an in-memory single node.
  function renderCluster() {
    const c = state.cluster;
    const e = $("cluster");
    if (!c || c.mode === "memory") {
      e.hidden = true;
      return;
    }
    e.hidden = false;
    const members = (c.members || []).map((m) => m.id + " " + m.state).join(", ");
    setText("cluster", c.mode + " · node " + c.node + " · leader " + (c.leader || "none") + (members ? " · " + members : ""));
  }

  function setText(id, text) {
    const e = $(id);
    if (e.textContent !== text) e.textContent = text;
  }

  function renderTiles() {
    const s = state.stats;
    if (!s) return;
    const t = s.totals;
    setText("version", s.version ? s.version : "");
    setText("t-held", fmtCount(s.held));
    setText("t-keys", s.keys + (s.keys === 1 ? " key in the table" : " keys in the table"));
    setText("t-waiters", fmtCount(s.waiters));
    setText("t-timeouts", fmtCount(t.timeouts) + " timed out");
    setText("t-sessions", fmtCount(s.sessions));
    setText("t-conns", fmtCount(t.connections) + " connections");
    setText("t-grants", fmtCount(t.grants));
    const last = state.samples[state.samples.length - 1];
    setText("t-grants-rate", last ? fmtRate(last.grants_per_second) + " per second now" : "");
    setText("t-wait", s.wait.count ? fmtDuration(s.wait.p99_seconds) : "–");
    setText("t-wait-mean", s.wait.count ? "mean " + fmtDuration(s.wait.mean_seconds) : "no grant yet");
    $("t-wait-mean").title = "hand-off p99 " + fmtDuration(s.handoff.p99_seconds);
    const rel = t.releases + t.session_end_releases + t.lease_expiries + t.forced_releases;
    setText("t-releases", fmtCount(rel));
    setText("t-forced", fmtCount(t.lease_expiries) + " expired · " + fmtCount(t.forced_releases) + " forced");
    const z = s.zookeeper;
    if (z) {
      setText("t-znodes", fmtCount(z.znodes));
      setText("t-zk", fmtCount(z.ephemerals) + " ephemeral");
      $("t-zk").title = "ZooKeeper: " + z.sessions + (z.sessions === 1 ? " session · " : " sessions · ") +
        z.watches + (z.watches === 1 ? " watch" : " watches") + " · zxid 0x" + BigInt(z.zxid).toString(16);
    }
  }

  const SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  }

  // drawChart draws series (arrays of numbers, one per sample) into an
  // SVG of viewBox 300x90, scaled to the largest value.
  function drawChart(node, maxLabel, series, classes, fmt) {
    const W = 300, H = 90, PAD = 4;
    const n = Math.max(...series.map((s) => s.length));
    let max = 0;
    for (const s of series) for (const v of s) if (v > max) max = v;
    const top = max > 0 ? max * 1.15 : 1;
    node.replaceChildren();
    for (const f of [0, 0.5, 1]) {
      const y = PAD + (H - 2 * PAD) * f;
      node.append(svg("line", { x1: 0, x2: W, y1: y, y2: y, class: "gridline" }));
    }
    if (n >= 2) {
      series.forEach((s, i) => {
        const pts = s.map((v, j) => {
          const x = (W * (j + (n - s.length))) / (n - 1);
          const y = H - PAD - ((H - 2 * PAD) * v) / top;
          return [x, y];
        });
        const line = pts.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ");
        if (i === 0) {
          const area = "M" + pts[0][0].toFixed(1) + "," + (H - PAD) + " L" + line.replace(/ /g, " L") +
            " L" + pts[pts.length - 1][0].toFixed(1) + "," + (H - PAD) + " Z";
          node.append(svg("path", { d: area, class: "area" }));
        }
        node.append(svg("polyline", { points: line, class: "line " + (classes[i] || "") }));
      });
    }
    setText(maxLabel, max > 0 ? fmt(max) : "");
  }

  function renderCharts() {
    const sm = state.samples;
    const span = sm.length * (state.interval || 1);
    const spanText = span >= 60 ? Math.round(span / 60) + " min ago" : Math.round(span) + " s ago";
    setText("c-grants-span", sm.length ? spanText : "");
    setText("c-wait-span", sm.length ? spanText : "");
    const last = sm[sm.length - 1];
    setText("c-grants-now", last ? fmtRate(last.grants_per_second) : "");
    setText("c-wait-now", last ? fmtDuration(last.wait_p99_seconds) : "");
    drawChart($("c-grants"), "c-grants-max", [sm.map((s) => s.grants_per_second)], [""], fmtRate);
    drawChart($("c-wait"), "c-wait-max", [sm.map((s) => s.wait_mean_seconds), sm.map((s) => s.wait_p99_seconds)], ["", "p99"], fmtDuration);
  }

  // ---------- locks table ----------

  function longestHold(l) {
    let best = -1;
    for (const h of l.holders) if (h.held_seconds > best) best = h.held_seconds;
    return best;
  }

  function nearestLease(l) {
    let best = Infinity;
    for (const h of l.holders) {
      if (h.lease_expires_at) best = Math.min(best, secondsBetween(state.listTime, h.lease_expires_at));
    }
    return best;
  }

  const lockKeys = {
    key: (l) => l.key,
    mode: (l) => (l.holders.length ? l.mode : "~"),
    holder: (l) => (l.holders.length ? l.holders[0].protocol + " " + l.holders[0].session : "~"),
    token: (l) => (l.holders.length ? BigInt(l.holders[l.holders.length - 1].token) : -1n),
    held: (l) => longestHold(l),
    lease: (l) => nearestLease(l),
    waiters: (l) => l.waiters.length,
  };

  function compare(a, b) {
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function sorted(rows, keys, sort, tie) {
    const f = keys[sort.col];
    return rows.slice().sort((a, b) => sort.dir * compare(f(a), f(b)) || compare(tie(a), tie(b)));
  }

  function holderCell(l) {
    if (!l.holders.length) {
      return td({ "data-label": "Held by" }, el("span", { class: "muted", text: l.waiters.length ? "nobody (queue forming)" : "nobody" }));
    }
    return td({ "data-label": "Held by" }, ...l.holders.map((h) => {
      const who = h.session ? "session " + h.session : "lease, session gone";
      return el("div", { class: "holder" },
        el("span", { text: who }), " ",
        el("span", { class: "proto", text: [h.protocol, h.peer].filter(Boolean).join(" · ") }));
    }));
  }

  function waitersCell(l) {
    if (!l.waiters.length) {
      return td({ "data-label": "Waiting" }, el("span", { class: "muted", text: "–" }));
    }
    const box = el("div", { class: "waiters" });
    for (const w of l.waiters) {
      const title = "session " + w.session + (w.protocol ? " · " + w.protocol : "") + (w.peer ? " · " + w.peer : "") +
        " · " + w.mode + (w.keys > 1 ? " · " + w.keys + " keys" : "") +
        (w.deadline ? " · gives up in " + fmtDuration(secondsBetween(state.listTime, w.deadline)) : " · waits forever");
      box.append(el("span", { class: "waiter", title },
        el("span", { class: "pos", text: w.position + " ahead" }),
        el("span", { text: "s" + w.session }),
        el("span", { class: "for", text: fmtDuration(w.waited_seconds) })));
    }
    return td({ "data-label": "Waiting" }, box);
  }

  function renderLocks() {
    const q = state.search.trim().toLowerCase();
    const rows = q ? state.locks.filter((l) => l.key.toLowerCase().includes(q)) : state.locks;
    const list = sorted(rows, lockKeys, state.sort.locks, (l) => l.key);
    const body = $("locks-body");
    const seen = new Set();
    const frag = document.createDocumentFragment();
    for (const l of list) {
      seen.add(l.key);
      const held = l.holders.length > 0;
      let modeBadge;
      if (held) modeBadge = el("span", { class: "badge " + l.mode, text: l.mode + (l.limit ? " ≤" + l.limit : "") });
      else if (l.delayed_until) modeBadge = el("span", { class: "badge delayed", text: "lock-delay" });
      else modeBadge = el("span", { class: "badge free", text: "free" });
      const lease = nearestLease(l);
      const tokens = l.holders.map((h) => h.token);
      const tr = el("tr", { "data-key": l.key, class: state.seen.has(l.key) ? null : "new" },
        td({ class: "primary", "data-label": "Key" }, el("span", { class: "key", text: l.key })),
        td({ "data-label": "Mode" }, modeBadge),
        holderCell(l),
        td({ class: "num mono" + (held ? "" : " blank"), "data-label": "Token", title: tokens.join(", ") },
          held ? tokens[tokens.length - 1] : "–"),
        td({ class: "num" + (held ? "" : " blank"), "data-label": "Held for" }, held ? fmtDuration(longestHold(l)) : "–"),
        td({ class: "num" + (isFinite(lease) ? "" : " blank"), "data-label": "Lease" },
          isFinite(lease) ? fmtDuration(lease) + " left" : "–"),
        waitersCell(l));
      frag.append(tr);
    }
    body.replaceChildren(frag);
    state.seen = seen;
    const total = state.locks.length;
    setText("locks-count", q ? list.length + " of " + total : String(total));
    $("locks-empty").hidden = list.length > 0;
    setText("locks-empty", q ? "No key matches “" + state.search.trim() + "”." : "No lock is held or waited for.");
    const more = $("locks-more");
    more.hidden = !state.more;
    if (state.more) setText("locks-more", "Showing the first " + total + " keys; use latch status or /v1/locks?after= for the rest.");
  }

  // ---------- sessions table ----------

  const sessionKeys = {
    id: (s) => s.id,
    protocol: (s) => s.protocol || "",
    peer: (s) => s.peer || "",
    age: (s) => secondsBetween(s.opened_at, state.sessionsTime),
    held: (s) => s.held,
    waiting: (s) => s.waiting,
    ttl: (s) => s.ttl_seconds || 0,
    ephemerals: (s) => (s.ephemerals ? s.ephemerals.length : -1),
  };

  // ephemeralsCell lists a ZooKeeper session's ephemeral znodes: the
  // first few, and how many more (all of them in the title).
  function ephemeralsCell(s) {
    const label = { "data-label": "Ephemerals" };
    if (!s.ephemerals) return td(label, el("span", { class: "muted", text: "–" }));
    if (!s.ephemerals.length) return td(label, el("span", { class: "muted", text: "none" }));
    const SHOW = 3;
    const box = el("div", { class: "ephemerals", title: s.ephemerals.join("\n") });
    for (const p of s.ephemerals.slice(0, SHOW)) box.append(el("div", { class: "mono", text: p }));
    if (s.ephemerals.length > SHOW) box.append(el("div", { class: "muted", text: "+" + (s.ephemerals.length - SHOW) + " more" }));
    return td(label, box);
  }

  function renderSessions() {
    const list = sorted(state.sessions, sessionKeys, state.sort.sessions, (s) => s.id);
    const frag = document.createDocumentFragment();
    for (const s of list) {
      frag.append(el("tr", { "data-session": s.id },
        td({ class: "primary", "data-label": "Session" }, el("span", { class: "key", text: "session " + s.id })),
        td({ "data-label": "Protocol" }, s.protocol || el("span", { class: "muted", text: "–" })),
        td({ class: "mono", "data-label": "Peer" }, s.peer || el("span", { class: "muted", text: "–" })),
        td({ class: "num", "data-label": "Open for" }, fmtDuration(secondsBetween(s.opened_at, state.sessionsTime))),
        td({ class: "num", "data-label": "Holds" }, s.held),
        td({ class: "num", "data-label": "Waits" }, s.waiting),
        td({ class: "num", "data-label": "TTL" }, s.ttl_seconds ? fmtDuration(s.ttl_seconds) : "–"),
        ephemeralsCell(s)));
    }
    $("sessions-body").replaceChildren(frag);
    setText("sessions-count", String(state.sessions.length));
    $("sessions-empty").hidden = state.sessions.length > 0;
  }

  // ---------- interaction ----------

  function wireSort(tableId, which) {
    const ths = document.querySelectorAll("#" + tableId + " th[data-sort]");
    for (const th of ths) {
      th.querySelector("button").addEventListener("click", () => {
        const s = state.sort[which];
        const col = th.dataset.sort;
        s.dir = s.col === col ? -s.dir : 1;
        s.col = col;
        for (const o of ths) o.removeAttribute("aria-sort");
        th.setAttribute("aria-sort", s.dir > 0 ? "ascending" : "descending");
        render();
      });
    }
  }

  function start() {
    wireSort("locks", "locks");
    wireSort("sessions", "sessions");
    const search = $("search");
    search.addEventListener("input", () => {
      state.search = search.value;
      renderLocks();
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "/" && document.activeElement !== search) {
        e.preventDefault();
        search.focus();
      }
    });
    // One refresh at a time; none while the page is hidden.
    let timer = null, busy = false;
    const loop = async () => {
      timer = null;
      busy = true;
      await refresh();
      busy = false;
      if (!document.hidden) timer = setTimeout(loop, REFRESH_MS);
    };
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) {
        clearTimeout(timer);
        timer = null;
      } else if (timer === null && !busy) {
        loop();
      }
    });
    loop();
  }

  start();
})();
