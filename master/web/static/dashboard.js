// fairshare dashboard: polls the master's JSON API (/api/v1/...) and draws plain DOM and SVG.
// No library, no build step, no network access beyond the master that served the page.
// The page's other scripts (charts.js, details.js, completed.js) come before this one in the
// same <script>: this one starts the refresh loop.
// Every value shown comes from one API answer; names from clients are inserted as text only.
"use strict";

const REFRESH_MS = Math.max(500, Number(new URLSearchParams(location.search).get("refresh")) || 2000);
const HISTORY_MS = 30000;
const TASK_PAGE = 100;
const PALETTE = ["#2f6fdb", "#d1343a", "#1a9c5b", "#f0a202", "#8e44ad", "#00a3b4", "#b5651d",
  "#e84393", "#5d6d7e", "#6ab04c"];
const TASK_STATES = ["STAGING", "STARTING", "RUNNING", "KILLING", "FINISHED", "FAILED", "KILLED",
  "ERROR", "LOST", "DROPPED", "UNREACHABLE", "GONE"];

const view = { state: null, history: { points: [] }, live: [], events: [], lastEvent: 0,
  colors: new Map(), lastHistory: 0, completed: { tasks: [], frameworks: [] }, note: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  return node;
}

function fill(tbody, rows, columns, emptyText) {
  tbody.replaceChildren(...rows);
  if (!rows.length) {
    tbody.append(el("tr", {}, el("td", { colspan: columns, class: "empty" }, emptyText)));
  }
}

function num(value) {
  if (value === null || value === undefined) return "-";
  return Number.isInteger(value) ? String(value) : String(Number(value.toFixed(3)));
}

// A quantity of a resource in its unit: mem and disk are MiB in fairshare, shown in MiB, GiB or
// TiB; cpus and other resources as plain numbers.
const MIB_RESOURCES = new Set(["mem", "disk"]);
const MIB_UNITS = ["MiB", "GiB", "TiB", "PiB"];

function qty(name, value) {
  if (value === null || value === undefined) return "-";
  if (!MIB_RESOURCES.has(name)) return num(value);
  let scaled = value;
  let unit = 0;
  while (Math.abs(scaled) >= 1024 && unit < MIB_UNITS.length - 1) {
    scaled /= 1024;
    unit += 1;
  }
  return `${num(Number(scaled.toFixed(unit ? 2 : 0)))} ${MIB_UNITS[unit]}`;
}

function resourcesText(resources) {
  const entries = Object.entries(resources || {});
  return entries.length ? entries.map(([k, v]) => `${k} ${qty(k, v)}`).join("; ") : "-";
}

function ago(seconds) {
  if (!seconds) return "-";
  const delta = Math.max(0, Date.now() / 1000 - seconds);
  if (delta < 60) return `${Math.round(delta)} s ago`;
  if (delta < 3600) return `${Math.round(delta / 60)} min ago`;
  return `${(delta / 3600).toFixed(1)} h ago`;
}

function clock(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
}

function badge(state) {
  return el("span", { class: `state ${state}` }, state);
}

function colorOf(id) {
  if (!view.colors.has(id)) view.colors.set(id, PALETTE[view.colors.size % PALETTE.length]);
  return view.colors.get(id);
}

function bar(total, used, offered, inline) {
  const part = (value, cls) => el("span", {
    class: cls, style: `width:${total > 0 ? Math.min(100, (100 * value) / total) : 0}%`,
  });
  return el(inline ? "span" : "div", { class: inline ? "bar inline" : "bar" },
    part(used, "used"), part(offered, "offered"));
}

async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function renderOverview(state) {
  document.getElementById("master").textContent =
    `master ${state.master_id.slice(0, 12)} · policy ${state.policy} · placement ` +
    `${state.placement} · version ${state.version} · up ${ago(state.started_at).replace(" ago", "")}`;
  const cards = [];
  for (const [name, total] of Object.entries(state.total)) {
    const used = state.used[name] || 0;
    const offered = state.offered[name] || 0;
    const free = state.free[name] || 0;
    cards.push(el("div", { class: "card", "data-resource": name },
      el("div", { class: "resource" }, name),
      el("div", { class: "big" }, el("span", { class: "capacity" }, qty(name, total)),
        el("span", { class: "muted" }, " capacity")),
      bar(total, used, offered),
      el("div", {},
        el("span", { class: "legend-key", style: "background:var(--used)" }), "used ",
        el("b", { class: "used" }, qty(name, used)), "  ",
        el("span", { class: "legend-key", style: "background:var(--offered)" }), "offered ",
        el("b", { class: "offered" }, qty(name, offered)), "  free ",
        el("b", { class: "free" }, qty(name, free)))));
  }
  const counts = state.counts;
  cards.push(el("div", { class: "card", "data-resource": "" },
    el("div", { class: "resource" }, "cluster"),
    el("div", {}, el("b", { id: "count-agents" }, counts.agents), " agents, ",
      el("b", { id: "count-frameworks" }, counts.frameworks), " frameworks"),
    el("div", {}, el("b", { id: "count-tasks" }, counts.tasks), " tasks, ",
      el("b", { id: "count-offers" }, counts.offers), " offers outstanding")));
  document.getElementById("overview").replaceChildren(...cards);
}

function renderFrameworks(state) {
  const rows = state.frameworks.map((f) => el("tr", { "data-framework-id": f.id },
    el("td", {}, el("span", { class: "legend-key", style: `background:${colorOf(f.id)}` }),
      el("a", { href: `#framework/${encodeURIComponent(f.id)}` },
        el("b", { class: "name" }, f.name))),
    el("td", { class: "id", title: f.id }, f.id.slice(0, 15)),
    el("td", {}, f.role),
    el("td", {}, badge(f.state)),
    el("td", { class: "num weight" }, num(f.weight)),
    el("td", { class: "num" }, bar(1, f.dominant_share, 0, true),
      el("span", { class: "share" }, f.dominant_share.toFixed(3))),
    el("td", { class: "num weighted" }, f.weighted_share.toFixed(3)),
    el("td", {}, f.dominant_resource || "-"),
    el("td", { class: "num" }, el("span", { class: "running" }, f.running), " / ",
      f.wanted === null ? "∞" : f.wanted,
      f.preempted > 0 ? el("span", { class: "preempted", title: "tasks the rebalancer killed" },
        ` (${f.preempted} preempted)`) : null),
    el("td", {}, el("code", {}, resourcesText(f.allocated)))));
  fill(document.querySelector("#frameworks tbody"), rows, 10, "no frameworks");
  document.getElementById("frameworks-count").textContent = `(${state.frameworks.length})`;
}

// A role's quota: each guaranteed or limited resource as held / guarantee / limit, with a bar
// of held against the guarantee (or the limit when there is no guarantee); "-" when none.
function quotaText(r) {
  const guarantee = r.guarantee || {};
  const limit = r.limit || {};
  const names = [...new Set([...Object.keys(guarantee), ...Object.keys(limit)])].sort();
  if (!names.length) return "-";
  return el("span", {}, ...names.map((name) => {
    const held = (r.allocated || {})[name] || 0;
    const cap = guarantee[name] ?? limit[name];
    const parts = [qty(name, held), name in guarantee ? `≥${qty(name, guarantee[name])}` : "",
      name in limit ? `≤${qty(name, limit[name])}` : ""].filter(Boolean).join(" ");
    return el("span", { class: "quota-item" }, bar(cap, held, 0, true),
      el("code", {}, `${name} ${parts}`));
  }), r.below_guarantee ? el("b", { class: "below" }, " below guarantee") : "");
}

// The role tree in pre-order (a role before those below it); figures are subtree totals.
function renderRoles(state) {
  const roles = state.roles || [];
  const rows = roles.map((r) => el("tr", { "data-role": r.role },
    el("td", { style: `padding-left:${1.2 * r.depth}em` }, el("b", { class: "role" }, r.role)),
    el("td", { class: "num weight" }, num(r.weight)),
    el("td", { class: "num" }, bar(1, r.share, 0, true),
      el("span", { class: "share" }, r.share.toFixed(3))),
    el("td", { class: "num weighted" }, r.weighted_share.toFixed(3)),
    el("td", {}, r.dominant_resource || "-"),
    el("td", { class: "num" }, el("span", { class: "frameworks" }, r.subtree_frameworks),
      el("span", { class: "muted" }, ` (${r.frameworks})`)),
    el("td", { class: "num running" }, r.running_tasks),
    el("td", {}, el("code", {}, resourcesText(r.allocated))),
    el("td", { class: r.below_guarantee ? "quota below" : "quota" }, quotaText(r))));
  fill(document.querySelector("#roles tbody"), rows, 9, "no roles in use");
  const top = roles.filter((r) => r.depth === 0);
  const allocated = {};
  for (const r of top) {
    for (const [k, v] of Object.entries(r.allocated)) allocated[k] = (allocated[k] || 0) + v;
  }
  const sum = (key) => top.reduce((total, r) => total + r[key], 0);
  const foot = roles.length ? [el("tr", { class: "totals" },
    el("td", {}, el("b", {}, "all roles")), el("td", {}), el("td", {}), el("td", {}),
    el("td", {}), el("td", { class: "num" }, sum("subtree_frameworks")),
    el("td", { class: "num" }, sum("running_tasks")),
    el("td", {}, el("code", {}, resourcesText(allocated))), el("td", {}))] : [];
  document.querySelector("#roles tfoot").replaceChildren(...foot);
  const hierarchy = state.hierarchy === "flat"
    ? "(hierarchy flat: frameworks are ordered directly; a role's share is what it holds)"
    : `(hierarchy ${state.hierarchy}: among siblings the lowest weighted share = share / weight` +
      " is served first; frameworks, running and allocated are subtree totals)";
  document.getElementById("roles-hierarchy").textContent = roles.length ? hierarchy : "";
}

function renderAgents(state) {
  const rows = state.agents.map((a) => {
    const util = el("div", { class: "util" });
    for (const [name, total] of Object.entries(a.resources.total)) {
      const used = a.resources.used[name] || 0;
      const offered = a.resources.offered[name] || 0;
      util.append(el("span", {}, name), bar(total, used, offered),
        el("span", { class: "muted" },
          `${qty(name, used)} + ${qty(name, offered)} of ${qty(name, total)}`));
    }
    const attributes = Object.entries(a.attributes).map(([k, v]) => `${k}:${v}`).join(";");
    return el("tr", { "data-agent-id": a.id },
      el("td", { class: "id", title: a.id },
        el("a", { href: `#agent/${encodeURIComponent(a.id)}` }, a.id.slice(0, 18))),
      el("td", {}, `${a.hostname}:${a.port}`),
      el("td", {}, badge(a.state)),
      el("td", {}, attributes || "-"),
      el("td", {}, util),
      el("td", {}, ago(a.last_heard)));
  });
  fill(document.querySelector("#agents tbody"), rows, 6, "no agents");
  document.getElementById("agents-count").textContent = `(${state.agents.length})`;
}

// A task's last status: who reported it (its agent or the master) and when, with its reason,
// message, exit code and health when it has them.
function lastStatus(t) {
  const parts = [t.source === "AGENT" ? "agent" : "master",
    t.updated_at ? ago(t.updated_at) : "", t.reason, t.message,
    t.exit_code === null || t.exit_code === undefined || (t.message || "").includes("exit")
      ? "" : `exit ${t.exit_code}`,
    t.healthy === null || t.healthy === undefined ? "" : (t.healthy ? "healthy" : "unhealthy")];
  return parts.filter(Boolean).join(" · ");
}

function logsLink(t) {
  if (!t.command) return null;
  const href = `#logs/${encodeURIComponent(t.framework_id)}/${encodeURIComponent(t.task_id)}`;
  return el("a", { href, class: "logs-link", title: "stdout and stderr of the task" }, "logs");
}

// One row of a task table: its name and logs link, framework, agent, state, resources, last
// status (`t` a task of /api/v1/tasks, or a completed one of /api/v1/completed).
function taskRow(t, state) {
  if (!state.byId) {  // built once per state document
    state.byId = { frameworks: new Map(state.frameworks.map((f) => [f.id, f])),
      agents: new Map(state.agents.map((a) => [a.id, a])) };
  }
  const framework = state.byId.frameworks.get(t.framework_id)  // or one that ended
    || view.completed.frameworks.find((f) => f.framework_id === t.framework_id);
  const agent = state.byId.agents.get(t.agent_id);
  const resources = resourcesText(typeof t.resources === "string"  // a completed task's
    ? Object.fromEntries(t.resources.split(";").filter(Boolean).map((item) => {
      const [name, value] = item.split(":");
      return [name, Number(value)];
    })) : t.resources);
  return el("tr", { "data-task-id": t.task_id },
    el("td", {}, t.name, " ", logsLink(t)),
    el("td", { title: t.framework_id }, el("a", {
      href: `#framework/${encodeURIComponent(t.framework_id)}` },
      framework ? framework.name : t.framework_id)),
    el("td", { title: t.agent_id }, el("a", { href: `#agent/${encodeURIComponent(t.agent_id)}` },
      agent ? `${agent.hostname}:${agent.port}` : t.agent_id)),
    el("td", {}, badge(t.state)),
    el("td", {}, el("code", {}, resources)),
    el("td", { class: "muted last-status" }, lastStatus(t) || "-"));
}

async function refreshTasks(state) {
  const filter = document.getElementById("task-state").value;
  const query = new URLSearchParams({ limit: TASK_PAGE });
  if (filter) query.set("state", filter);
  const page = await getJSON(`/api/v1/tasks?${query}`);
  const rows = page.tasks.map((t) => taskRow(t, state));
  fill(document.querySelector("#tasks tbody"), rows, 6, "no tasks");
  const shown = page.tasks.length < page.total ? `, first ${page.tasks.length} shown` : "";
  document.getElementById("tasks-count").textContent = `(${page.total}${shown})`;
}

async function refreshEvents() {
  const answer = await getJSON(`/api/v1/events?since=${view.lastEvent}`);
  if (!answer.events.length) return;
  view.lastEvent = answer.events[answer.events.length - 1].seq;
  view.events = view.events.concat(answer.events).slice(-50);
  const items = view.events.slice().reverse().map((e) => el("li", { "data-event": e.event },
    el("span", { class: "when" }, clock(e.time)), el("b", {}, e.event), " ",
    el("span", { class: "muted" },
      Object.entries(e.fields).map(([k, v]) => `${k}=${v}`).join(" "))));
  document.getElementById("events").replaceChildren(...items);
}

function livePoint(state) {
  const frameworks = {};
  for (const f of state.frameworks) {
    frameworks[f.id] = { name: f.name, dominant_share: f.dominant_share,
      weighted_share: f.weighted_share };
  }
  return { time: Date.now() / 1000, frameworks };
}

async function refresh() {
  const live = document.getElementById("live");
  try {
    const state = await getJSON("/api/v1/state");
    view.state = state;
    view.live.push(livePoint(state));
    view.live = view.live.filter((p) => p.time > Date.now() / 1000 - 3600);
    if (Date.now() - view.lastHistory > HISTORY_MS) {
      view.history = await getJSON("/api/v1/history");
      view.lastHistory = Date.now();
    }
    renderOverview(state);
    renderFrameworks(state);
    renderRoles(state);
    renderAgents(state);
    renderChart();
    await refreshTasks(state);
    await refreshEvents();
    await refreshCompleted(state);
    await renderDetail();
    document.getElementById("banner").hidden = true;
    live.className = "live ok";
    live.textContent = `updated ${clock(Date.now() / 1000)}`;
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  } catch (error) {
    const banner = document.getElementById("banner");
    banner.hidden = false;
    banner.textContent = `The master does not answer (${error.message}); retrying.`;
    live.className = "live down";
    live.textContent = "disconnected";
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

const stateFilter = document.getElementById("task-state");
for (const state of TASK_STATES) stateFilter.append(el("option", { value: state }, state));
stateFilter.addEventListener("change", () => view.state && refreshTasks(view.state));
window.addEventListener("hashchange", () => view.state && renderDetail(true));
refresh();
