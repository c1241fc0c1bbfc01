// mented's local page. Every text from the daemon (rules, commands, directories,
// session ids, messages) goes into the page as text nodes (`el` below): never as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const main = document.getElementById("main");
const liveState = document.getElementById("live-state");
const state = { page: "rules", live: [], logTimer: null, actions: null, histories: new Set() };

// Characters a reader cannot see, or that reorder or hide the text around them (controls,
// bidi overrides, zero-width and tag characters, line separators), shown as escapes, as
// mentectl shows them in a terminal (output.escape_controls); newlines and tabs stay.
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;

function visible(text) {
  return String(text).replace(INVISIBLE, (char) => {
    if (char === "\n" || char === "\t") return char;
    const code = char.codePointAt(0);
    if (code < 0x100) return `\\x${code.toString(16).padStart(2, "0")}`;
    return code < 0x10000 ? `\\u${code.toString(16).padStart(4, "0")}` : `\\U${code.toString(16).padStart(8, "0")}`;
  });
}

// An element with attributes and children; a string child is a text node.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" || typeof child === "number" ? document.createTextNode(visible(child)) : child);
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = visible(text);
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "on") {
      for (const [type, handler] of Object.entries(value)) node.addEventListener(type, handler);
    } else if (name === "dataset") {
      Object.assign(node.dataset, value);
    } else if (name === "class") {
      node.className = value;
    } else if (name === "value") {
      node.value = value;
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
}

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleString();
}

function firstLine(text) {
  const [first, ...rest] = String(text || "").split("\n");
  return rest.length ? first + " …" : first;
}

async function getJSON(path) {
  const reply = await fetch(path, { credentials: "same-origin" });
  const body = await reply.json().catch(() => ({ error: `HTTP ${reply.status}` }));
  if (!reply.ok) throw new Error(body.error || `HTTP ${reply.status}`);
  return body;
}

// A change: POST, JSON, from this page's origin (the server checks both).
async function post(path, body) {
  const reply = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return reply.json().catch(() => ({ status: 1, stdout: "", stderr: `HTTP ${reply.status}` }));
}

function said(result) {
  const ok = result.status === 0;
  const text = [result.stdout, result.stderr].filter(Boolean).join("\n").trim();
  return el("div", { class: `said ${ok ? "ok" : "error"}`, role: "status" }, text || (ok ? "done" : "failed"));
}

function errorBox(error) {
  return el("div", { class: "error-box" }, String(error.message || error));
}

// ------------------------------------------------------------------ pages

const pages = { rules: showRules, activity: showActivity, kept: showKept, health: showHealth };

function route() {
  const name = (location.hash || "#rules").slice(1).split("?")[0];
  state.page = pages[name] ? name : "rules";
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("current", link.dataset.page === state.page);
  }
  main.replaceChildren(el("p", { class: "empty" }, "loading…"));
  main.dataset.page = state.page;
  pages[state.page]().catch((error) => main.replaceChildren(errorBox(error)));
}

// ------------------------------------------------------------------ rules

// `#rules?cwd=DIR`: the rules as seen from DIR, a trusted project's team rules with yours.
function rulesPath() {
  const cwd = new URLSearchParams((location.hash.split("?")[1]) || "").get("cwd");
  return cwd ? `/api/rules?${new URLSearchParams({ cwd })}` : "/api/rules";
}

async function showRules() {
  const table = await loadActions();
  const cwd = new URLSearchParams((location.hash.split("?")[1]) || "").get("cwd") || "";
  const seen = el("input", { id: "seen-from", placeholder: "every project's rules", value: cwd });
  const from = el("form", { class: "filters card", id: "seen-form", on: { submit: (event) => {
    event.preventDefault();
    const dir = seen.value.trim();
    location.hash = dir ? `#rules?${new URLSearchParams({ cwd: dir })}` : "#rules";
  } } }, el("label", { for: "seen-from" }, "as seen from"), seen,
  el("button", { type: "submit" }, "Show"), el("a", { href: "#rules" }, "all"));
  main.replaceChildren(addForm(table), from, el("div", { id: "rules" }));
  await refreshRules();
}

async function loadActions() {
  if (!state.actions) state.actions = (await getJSON("/api/actions")).actions;
  return state.actions;
}

function addForm(table) {
  const action = el("select", { name: "action", id: "add-action" },
    table.map((one) => el("option", { value: one.name }, one.name)),
    el("option", { value: "" }, "(pinned: every session)"));
  action.value = table.some((one) => one.name === "git-commit") ? "git-commit" : (table[0] || {}).name || "";
  const text = el("textarea", { name: "text", id: "add-text", placeholder: "commit messages: single line, no emojis", required: true });
  const agent = el("input", { name: "agent", id: "add-agent", placeholder: "every agent" });
  const project = el("input", { name: "project", id: "add-project", placeholder: "every project (an absolute directory)" });
  const checks = el("textarea", { name: "checks", id: "add-checks", placeholder: "one a line, e.g. subject max 72" });
  const out = el("div", { id: "add-said" });
  const form = el("form", { class: "card rule-form", id: "add-form", on: { submit: async (event) => {
    event.preventDefault();
    const result = await post("/api/rule/add", {
      action: action.value, pinned: action.value === "", text: text.value,
      agent: agent.value.trim(), project: project.value.trim(), checks: checks.value,
    });
    out.replaceChildren(said(result));
    if (result.status === 0) {
      text.value = "";
      checks.value = "";
      await refreshRules(out);
    }
  } } },
  el("label", { for: "add-action" }, "action"), action,
  el("label", { for: "add-text" }, "rule"), text,
  el("label", { for: "add-agent" }, "agent"), agent,
  el("label", { for: "add-project" }, "project"), project,
  el("label", { for: "add-checks" }, "checks"), checks,
  el("span"), el("div", null, el("button", { class: "primary", type: "submit", id: "add-submit" }, "Add rule"), out));
  return el("section", null, el("h2", null, "Add a rule"), form);
}

async function refreshRules(keep) {
  const found = await getJSON(rulesPath());
  const holder = document.getElementById("rules");
  const fresh = found.actions.map((group) =>
    el("section", { class: "action", dataset: { action: group.action } },
      el("h2", null, group.action, " ", el("span", { class: "count" }, `(${group.rules.length})`)),
      group.rules.map((rule) => ruleCard(rule, group.action))));
  if (found.pinned.length) {
    fresh.push(el("section", { class: "action", dataset: { action: "(pinned)" } },
      el("h2", null, "pinned: every session ", el("span", { class: "count" }, `(${found.pinned.length})`)),
      found.pinned.map((rule) => ruleCard(rule, "(pinned)"))));
  }
  const list = el("div", { id: "rules" },
    found.untrusted ? el("p", { class: "said error", id: "untrusted" }, found.untrusted) : null,
    fresh.length ? fresh : el("p", { class: "empty" }, "no rules yet"));
  if (holder) holder.replaceWith(list);
  else if (state.page === "rules") main.append(list);
  if (keep && !document.contains(keep)) main.prepend(keep);
}

function ruleCard(rule, action) {
  const body = el("div", { class: "below" });
  const origin = { yours: "yours", team: "the project's team rules (.mented/)", synced: "synced from another machine" }[rule.from];
  const card = el("article", { class: "card rule", dataset: { id: rule.id, handle: rule.handle, action } },
    el("div", { class: "head" },
      el("span", { class: "handle" }, `[${rule.handle}]`),
      el("span", { class: `badge ${rule.from}` }, origin || rule.from),
      rule.fork ? el("span", { class: "badge fork", title: "superseded apart on two machines: supersede one version to settle it" }, "fork") : null,
      el("span", { class: "meta" }, rule.scope),
      el("span", { class: "meta" }, clock(rule.created_at))),
    el("div", { class: "content" }, rule.content),
    rule.checks.length ? el("ul", { class: "checks" }, rule.checks.map((check) => el("li", null, `check: ${check}`))) : null,
    el("div", { class: "actions-row" },
      el("button", { type: "button", class: "history-button", on: { click: () => toggleHistory(rule, body) } }, "History"),
      rule.from === "team" ? el("span", { class: "meta" }, "changed in the project's .mented/ file") : [
        el("button", { type: "button", class: "supersede-button", on: { click: () => supersedeForm(rule, body) } }, "Supersede"),
        el("button", { type: "button", class: "danger forget-button", on: { click: () => forget(rule, body) } }, "Forget"),
      ]),
    body);
  if (state.histories.has(rule.id)) drawHistory(rule, body);
  return card;
}

function supersedeForm(rule, body) {
  const text = el("textarea", { class: "supersede-text" });
  text.value = rule.content;
  const checks = el("textarea", { class: "supersede-checks", placeholder: "one a line; empty: keep the old ones" });
  checks.value = rule.checks.join("\n");
  const none = el("input", { type: "checkbox", class: "supersede-no-checks" });
  const out = el("div");
  const form = el("form", { class: "rule-form", on: { submit: async (event) => {
    event.preventDefault();
    const result = await post("/api/rule/supersede", {
      id: rule.id, text: text.value, checks: none.checked ? "" : checks.value, no_checks: none.checked,
    });
    out.replaceChildren(said(result));
    if (result.status === 0) await refreshRules(said(result));
  } } },
  el("label", null, "new text"), text,
  el("label", null, "checks"), checks,
  el("label", null, "no checks"), el("span", null, none),
  el("span"), el("div", null, el("button", { class: "primary", type: "submit" }, "Supersede"), out));
  body.replaceChildren(form);
}

async function forget(rule, body) {
  if (!confirm(`Forget rule [${rule.handle}] for good?`)) return;
  const result = await post("/api/rule/forget", { id: rule.id });
  body.replaceChildren(said(result));
  if (result.status === 0) await refreshRules(said(result));
}

async function toggleHistory(rule, body) {
  if (state.histories.has(rule.id)) {
    state.histories.delete(rule.id);
    body.replaceChildren();
    return;
  }
  state.histories.add(rule.id);
  await drawHistory(rule, body);
}

// Open histories stay open when the list is drawn again (after a change, an event).
async function drawHistory(rule, body) {
  try {
    const found = await getJSON(`/api/history?id=${encodeURIComponent(rule.id)}`);
    body.replaceChildren(historyLine(found));
  } catch (error) {
    body.replaceChildren(errorBox(error));
  }
}

// A rule's versions as a line, oldest on the left: each version a dot, a line from
// the version it replaced; a fork (two versions replacing the same one) takes a
// second lane, and the version that settles it has dashed lines from each tip.
function historyLine(found) {
  const versions = found.versions;
  const byId = new Map(versions.map((version, index) => [version.id, index]));
  const lane = new Map();
  const children = new Map();
  for (const version of versions) {
    const parent = version.supersedes;
    const taken = children.get(parent) || 0;
    children.set(parent, taken + 1);
    const parentLane = parent !== null && lane.has(parent) ? lane.get(parent) : 0;
    lane.set(version.id, parentLane + taken);
  }
  const lanes = Math.max(0, ...lane.values()) + 1;
  const stepX = 150, stepY = 56, left = 30, top = 24;
  const width = left * 2 + stepX * Math.max(0, versions.length - 1) + 120;
  const height = top + stepY * (lanes - 1) + 36;
  const drawing = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "versions of this rule" });
  const at = (id) => {
    const index = byId.get(id);
    return { x: left + stepX * index, y: top + stepY * (lane.get(id) || 0) };
  };
  for (const version of versions) {
    const here = at(version.id);
    const from = [version.supersedes, ...version.merges].filter((id) => id && byId.has(id));
    for (const id of from) {
      const there = at(id);
      const kind = id === version.supersedes ? "replaces" : "merge";
      drawing.append(svg("line", { x1: there.x, y1: there.y, x2: here.x, y2: here.y, class: kind }));
    }
  }
  for (const version of versions) {
    const here = at(version.id);
    const synced = version.from === "synced";
    const group = svg("g", { class: `version${version.live ? " live" : ""}${synced ? " synced" : ""}`, "data-id": version.id, "data-handle": version.handle });
    group.append(svg("title", {}, `${version.content}\n${clock(version.created_at)}${synced ? "\nsynced from another machine" : ""}`));
    group.append(svg("circle", { cx: here.x, cy: here.y, r: 7 }));
    group.append(svg("text", { x: here.x + 11, y: here.y - 4 }, `[${version.handle}]${version.live ? " current" : ""}`));
    group.append(svg("text", { x: here.x + 11, y: here.y + 11 }, new Date(version.created_at * 1000).toLocaleDateString()));
    group.append(svg("text", { x: here.x + 11, y: here.y + 24 }, firstLine(version.content).slice(0, 22)));
    drawing.append(group);
  }
  const notes = [];
  if (found.fork) notes.push(`${found.current.length} current versions: a fork (superseded apart on two machines); supersede one to settle it`);
  if (!found.current.length) notes.push("no version fires: the current one was forgotten");
  const gone = versions.flatMap((version) => version.forgotten_links);
  if (gone.length) notes.push(`forgotten versions: ${[...new Set(gone)].join(", ")}`);
  return el("div", { class: "history" }, drawing, notes.map((note) => el("p", { class: "note" }, note)));
}

// ------------------------------------------------------------------ activity

async function showActivity() {
  const params = new URLSearchParams((location.hash.split("?")[1]) || "");
  const field = (name, hint) => el("input", { name, id: `filter-${name}`, placeholder: hint, value: params.get(name) || "" });
  const agent = field("agent", "agent"), project = field("project", "project directory"), action = field("action", "action");
  const session = field("session", "session");
  const form = el("form", { class: "filters card", id: "filters", on: { submit: (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const input of [agent, project, action, session]) if (input.value.trim()) query.set(input.name, input.value.trim());
    location.hash = query.toString() ? `#activity?${query}` : "#activity";
  } } }, agent, project, action, session, el("button", { type: "submit" }, "Filter"),
  el("a", { href: "#activity" }, "all"));
  const live = el("table", { id: "live" }, el("thead", null, el("tr", null,
    ["time", "agent", "actions", "rules", "delivered", "command"].map((name) => el("th", null, name)))),
  el("tbody"));
  for (const event of state.live.filter(shown)) live.tBodies[0].append(liveRow(event, false));
  main.replaceChildren(form,
    el("h2", null, "Live ", el("span", { class: "count" }, "(as the hook fires)")), live,
    el("h2", null, "By session"), el("div", { id: "sessions" }, el("p", { class: "empty" }, "loading…")));
  await refreshSessions();
}

function filters() {
  const params = new URLSearchParams((location.hash.split("?")[1]) || "");
  const query = new URLSearchParams({ n: "200" });
  for (const name of ["agent", "project", "action", "session"]) if (params.get(name)) query.set(name, params.get(name));
  return query;
}

async function refreshSessions() {
  const holder = document.getElementById("sessions");
  if (!holder) return;
  let found;
  try {
    found = await getJSON(`/api/log?${filters()}`);
  } catch (error) {
    holder.replaceChildren(errorBox(error));
    return;
  }
  if (!found.sessions.length) {
    holder.replaceChildren(el("p", { class: "empty" }, "no hook fires yet"));
    return;
  }
  holder.replaceChildren(...found.sessions.map((group) => {
    const link = `#activity?${new URLSearchParams({ session: group.session || "" })}`;
    return el("section", { class: "card session", dataset: { session: group.session || "" } },
      el("div", { class: "head" },
        el("strong", null, group.agent), " ",
        el("a", { href: link, class: "meta" }, `session ${group.session || "(none)"}`), " ",
        el("span", { class: "meta" }, `in ${group.cwd || "?"}`)),
      el("table", null,
        el("thead", null, el("tr", null, ["time", "actions", "rules", "delivered", "why", "command"].map((name) => el("th", null, name)))),
        el("tbody", null, group.fires.map((fire) => el("tr", { class: "fire" },
          el("td", null, clock(fire.time)),
          el("td", null, fire.actions.join(", ")),
          el("td", null, fire.handles.map((handle) => `[${handle}]`).join(" ") || "none"),
          el("td", null, fire.delivered + (fire.test ? " (test fire)" : "")),
          el("td", null, fire.why),
          el("td", { class: "command" }, `$ ${firstLine(fire.command)}`))))));
  }));
}

function liveRow(event, fresh) {
  return el("tr", { class: `fire${fresh ? " new" : ""}`, dataset: { session: event.session || "" } },
    el("td", null, clock(event.time)),
    el("td", null, event.agent),
    el("td", null, event.actions.join(", ")),
    el("td", null, event.handles.map((handle) => `[${handle}]`).join(" ") || "none"),
    el("td", null, event.delivered),
    el("td", { class: "command" }, `$ ${firstLine(event.command)}`));
}

// Whether a live fire passes the Activity page's filters (the log's are the daemon's).
function shown(event) {
  const params = new URLSearchParams((location.hash.split("?")[1]) || "");
  const project = (params.get("project") || "").replace(/\/+$/, "");
  const cwd = event.cwd || "";
  return (!params.get("agent") || event.agent === params.get("agent"))
    && (!params.get("session") || event.session === params.get("session"))
    && (!params.get("action") || event.actions.includes(params.get("action")))
    && (!project || cwd === project || cwd.startsWith(`${project}/`));
}

function onFire(event) {
  state.live.unshift(event);
  state.live.length = Math.min(state.live.length, 200);
  const live = document.getElementById("live");
  if (live && shown(event)) live.tBodies[0].prepend(liveRow(event, true));
  clearTimeout(state.logTimer);
  state.logTimer = setTimeout(refreshSessions, 300);
}

// ------------------------------------------------------------------ kept

const SERIES = ["handed", "checked", "passed_first", "stopped", "let_through"];
const SERIES_NAMES = { handed: "handed over", checked: "checked", passed_first: "passed first time", stopped: "stopped", let_through: "let through" };

async function showKept() {
  const found = await getJSON("/api/kept?days=14");
  const legend = el("div", { class: "legend" }, SERIES.map((name) => el("span", { class: `s-${name}` }, SERIES_NAMES[name])));
  const total = found.total;
  const summary = el("p", { class: "meta" },
    `last ${found.days} days: ${total.checked} commands checked, ${total.passed_first} passed first time, ` +
    `${total.stopped} stopped, ${total.let_through} let through; ${total.handed} rules handed over in full`);
  if (!found.rules.length) {
    main.replaceChildren(el("h2", null, "Kept"), summary,
      el("p", { class: "empty" }, "nothing recorded yet: the figures come as the hook hands rules over and checks commands (`mentectl rule add ACTION TEXT --check ...`)"));
    return;
  }
  main.replaceChildren(el("h2", null, `Kept, per day over ${found.days} days`), summary, legend,
    ...found.rules.map((rule) => el("section", { class: "card chart", dataset: { id: rule.id } },
      el("div", { class: "head" },
        el("span", { class: "handle" }, `[${rule.handle}]`), " ",
        el("span", { class: "meta" }, rule.actions.join(", "))),
      el("div", { class: "content" }, firstLine(rule.content) || "(a rule mented no longer has)"),
      chart(rule.days))));
}

// A rule's figures per day as bars, one group a day (oldest on the left), one bar a figure.
function chart(days) {
  const width = 680, height = 150, left = 30, bottom = 20, top = 8, right = 10;
  const most = Math.max(1, ...days.flatMap((day) => SERIES.map((name) => day[name])));
  const slot = (width - left - right) / days.length;
  const bar = Math.max(1, (slot - 4) / SERIES.length);
  const y = (value) => top + (height - top - bottom) * (1 - value / most);
  const drawing = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "figures per day" });
  drawing.append(svg("line", { x1: left, y1: y(0), x2: width - right, y2: y(0), class: "axis" }));
  drawing.append(svg("text", { x: 2, y: y(most) + 4, "font-size": 10, fill: "#5d6875" }, String(most)));
  drawing.append(svg("text", { x: 2, y: y(0) + 4, "font-size": 10, fill: "#5d6875" }, "0"));
  const every = Math.ceil(days.length / 7);
  days.forEach((day, index) => {
    const x = left + slot * index + 2;
    // A day is the 24 hours up to `start` + 1 day: the last one ends now.
    const end = new Date((day.start + 86400) * 1000);
    if ((days.length - 1 - index) % every === 0) {
      drawing.append(svg("text", { x, y: height - 4, "font-size": 10, fill: "#5d6875" },
        end.toLocaleDateString(undefined, { month: "short", day: "numeric" })));
    }
    SERIES.forEach((name, which) => {
      if (!day[name]) return;
      const rect = svg("rect", { x: x + bar * which, y: y(day[name]), width: Math.max(1, bar - 1),
        height: y(0) - y(day[name]), class: `s-${name}`, fill: "currentColor" });
      rect.append(svg("title", {}, `${SERIES_NAMES[name]}: ${day[name]} (day to ${end.toLocaleString()})`));
      drawing.append(rect);
    });
  });
  return drawing;
}

// ------------------------------------------------------------------ health

async function showHealth() {
  main.replaceChildren(el("p", { class: "empty" }, "checking every link (as `mentectl doctor` does)…"));
  const found = await getJSON("/api/health");
  const again = el("button", { type: "button", on: { click: route } }, "Check again");
  const groups = found.groups.map((group) => el("section", { class: "card health-group", dataset: { name: group.name } },
    el("h2", null, group.name),
    el("table", null, el("tbody", null, group.checks.map((check) => el("tr", { class: "check" },
      el("td", { class: `state-${check.state}` }, check.state),
      el("td", null, check.link),
      el("td", null, check.detail, check.fix && check.state !== "ok" ? el("div", { class: "meta" }, `fix: ${check.fix}`) : null)))))));
  const sync = found.sync;
  const syncBox = el("section", { class: "card", id: "sync" }, el("h2", null, "sync"),
    !sync || !sync.remote ? el("p", { class: "meta" }, "not set up (`mentectl sync init URL`)") : [
      el("p", null, `remote: ${sync.remote}`),
      el("p", null, `last sync that worked: ${sync.last_ok ? clock(sync.last_ok) : "never"}`),
      sync.error ? el("p", { class: "state-fail" }, `last error: ${sync.error}`) : el("p", { class: "state-ok" }, "no error"),
      sync.skipped.length ? el("p", { class: "meta" }, `skipped: ${sync.skipped.join("; ")}`) : null,
    ]);
  main.replaceChildren(
    el("h2", null, found.ok ? "Every link works" : "Some links are broken: see the fix under each"),
    again, syncBox, ...groups);
}

// ------------------------------------------------------------------ live events

function listen() {
  const source = new EventSource("/api/events");
  source.addEventListener("hello", () => {
    liveState.textContent = "live";
    liveState.className = "state live";
  });
  source.addEventListener("gone", (message) => {
    const said = JSON.parse(message.data);
    liveState.textContent = `daemon: ${said.error}`;
    liveState.className = "state down";
  });
  source.addEventListener("message", (message) => {
    const event = JSON.parse(message.data);
    if (event.kind === "fire") onFire(event);
    if (event.kind === "rule" && state.page === "rules" && document.getElementById("rules")) refreshRules();
  });
  source.addEventListener("error", () => {
    liveState.textContent = "reconnecting…";
    liveState.className = "state down";
  });
}

window.addEventListener("hashchange", route);
route();
listen();
