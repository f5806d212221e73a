// fairshare dashboard: the detail pane of one agent (#agent/ID), one framework (#framework/ID)
// or one task's logs (#logs/FRAMEWORK_ID/TASK_ID), chosen by the URL's hash, shown above the
// overview and redrawn on each refresh (the logs only when asked: they are read from the agent).
// Agent maintenance is the AGENT_ACTIONS table: each entry one POST /api/v1/maintenance, sent
// with a JSON body and the X-Fairshare-Request header (the master refuses state changes
// without them). Uses el, badge, qty, ago, getJSON, taskTable, completedOf and view.
"use strict";

// The maintenance actions of an agent's pane: `when` says for which agent states it applies.
const AGENT_ACTIONS = [
  { action: "deactivate", label: "Deactivate",
    says: "offer none of its resources (its tasks keep running)",
    when: (agent) => agent.state === "ACTIVE" },
  { action: "drain", label: "Drain",
    says: "offer none of its resources; its tasks run to their end, then it is DRAINED",
    when: (agent) => agent.state === "ACTIVE" || agent.state === "DEACTIVATED" },
  { action: "drain_now", label: "Drain now",
    says: "offer none of its resources and kill its tasks now (their frameworks are told)",
    when: (agent) => ["ACTIVE", "DEACTIVATED", "DRAINING"].includes(agent.state) },
  { action: "reactivate", label: "Reactivate", says: "offer its resources again (ends a drain)",
    when: (agent) => ["DEACTIVATED", "DRAINING", "DRAINED"].includes(agent.state) },
];

async function postJSON(path, body) {
  const response = await fetch(path, { method: "POST", cache: "no-store", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", "X-Fairshare-Request": "dashboard" } });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
  return answer;
}

function route() {
  const [kind, ...ids] = location.hash.replace(/^#/, "").split("/").map(decodeURIComponent);
  return { kind, ids };
}

function pane(title, ...children) {
  return [el("h2", {}, ...title, " ", el("a", { href: "#", class: "close", title: "close" }, "×")),
    ...children.filter((child) => child !== null && child !== undefined)];
}

function facts(pairs) {
  return el("dl", { class: "facts" }, ...pairs.flatMap(([k, v]) => [el("dt", {}, k),
    el("dd", { "data-fact": k }, v === null || v === undefined || v === "" ? "-" : v)]));
}

function resourceTable(columns) {  // columns: [[heading, {name: value}], ...]
  const names = [...new Set(columns.flatMap(([, values]) => Object.keys(values || {})))];
  return el("table", { class: "resources" },
    el("thead", {}, el("tr", {}, el("th", {}, "resource"), ...columns.map(([h]) => el("th", {}, h)))),
    el("tbody", {}, ...names.map((name) => el("tr", { "data-resource": name }, el("td", {}, name),
      ...columns.map(([h, values]) => el("td", { class: `num ${h}` },
        qty(name, (values || {})[name] || 0)))))));
}

async function agentPane(id, state) {
  const a = state.agents.find((agent) => agent.id === id);
  if (!a) return pane([`Agent ${id}`], el("p", { class: "empty" }, "no such agent (now)"));
  const page = await getJSON(`/api/v1/tasks?${new URLSearchParams({ agent_id: id, limit: 1000 })}`);
  const attributes = Object.entries(a.attributes).map(([k, v]) => `${k}:${v}`).join("; ");
  const reservations = a.reservations.length ? el("ul", {}, ...a.reservations.map((r) =>
    el("li", {}, el("b", {}, r.role), ` ${resourcesText(r.resources)} `,
      el("span", { class: "muted" }, r.dynamic ? "(dynamic)" : "(static)")))) : "none";
  const actions = el("table", { id: "agent-actions" }, el("tbody", {}, ...AGENT_ACTIONS.map((d) =>
    el("tr", {}, el("td", {}, el("button", { "data-action": d.action, "data-agent-id": a.id,
      ...(d.when(a) ? {} : { disabled: "" }) }, d.label)), el("td", { class: "muted" }, d.says)))));
  const note = view.note && view.note.agent === id
    ? el("p", { class: view.note.ok ? "note ok" : "note bad", id: "action-note" }, view.note.text)
    : null;
  return pane([`Agent ${a.hostname}:${a.port} `, badge(a.state)],
    facts([["id", a.id], ["registered", ago(a.registered_at)], ["last heard", ago(a.last_heard)],
      ["attributes", attributes], ["reservations", reservations],
      ["idle reserved", resourcesText(a.reserved_free)]]),
    resourceTable([["total", a.resources.total], ["used", a.resources.used],
      ["offered", a.resources.offered], ["free", a.resources.free]]),
    el("h3", {}, "Maintenance"), actions, note,
    el("h3", {}, `Tasks (${page.total})`), taskTable(page.tasks.map((t) => taskRow(t, state)),
      "no tasks"),
    el("h3", {}, "Completed tasks"), completedOf("agent_id", id, state));
}

async function frameworkPane(id, state) {
  const f = state.frameworks.find((framework) => framework.id === id);
  const ended = view.completed.frameworks.find((framework) => framework.framework_id === id);
  if (!f) {
    const said = ended ? `ended ${ago(ended.removed_at)}: ${ended.reason}` : "no such framework";
    return pane([`Framework ${ended ? ended.name : id}`], el("p", { class: "empty" }, said),
      el("h3", {}, "Completed tasks"), completedOf("framework_id", id, state));
  }
  const page = await getJSON(`/api/v1/tasks?${new URLSearchParams({ framework_id: id,
    limit: 1000 })}`);
  const byState = Object.entries(f.tasks).map(([s, n]) => el("span", { class: "count",
    "data-state": s }, badge(s), ` ${n}`));
  return pane([`Framework ${f.name} `, badge(f.state)],
    facts([["id", f.id], ["role", f.role], ["weight", num(f.weight)],
      ["dominant share", f.dominant_share.toFixed(3)], ["weighted share", f.weighted_share.toFixed(3)],
      ["dominant resource", f.dominant_resource], ["running / wanted",
        `${f.running} / ${f.wanted === null ? "∞" : f.wanted}`], ["preempted", f.preempted],
      ["registered", ago(f.registered_at)], ["capabilities", f.capabilities.join(", ")],
      ["tasks by state", byState.length ? el("span", {}, ...byState) : "none"]]),
    resourceTable([["allocated", f.allocated], ["used", f.used], ["offered", f.offered]]),
    el("h3", {}, `Tasks (${page.total})`), taskTable(page.tasks.map((t) => taskRow(t, state)),
      "no tasks"),
    el("h3", {}, "Completed tasks"), completedOf("framework_id", id, state));
}

function errorOf(text) {
  try {
    return JSON.parse(text).error || text;
  } catch {
    return text;
  }
}

async function logsPane(frameworkId, taskId) {
  const box = el("div", { class: "logs" });
  for (const file of ["stdout", "stderr"]) {
    const query = new URLSearchParams({ task_id: taskId, framework_id: frameworkId, file,
      tail: 200 });
    const response = await fetch(`/api/v1/logs?${query}`, { cache: "no-store" });
    const text = await response.text();
    const shown = response.ok ? text : `(${response.status}) ${errorOf(text)}`;
    box.append(el("h3", {}, `${file} (last 200 lines)`),
      el("pre", { "data-file": file, class: response.ok ? "" : "bad" }, shown || "(empty)"));
  }
  return pane([`Logs of task ${taskId}`], el("p", { class: "muted" },
    "read from its agent with your identity, as fairshare logs ", taskId,
    frameworkId ? ` --framework ${frameworkId}` : "", " would; ",
    el("a", { href: location.hash, "data-reload": "" }, "reload")), box);
}

// Draw the pane the hash names (logs: only when `fresh`, i.e. on a hash change or a reload).
async function renderDetail(fresh) {
  const box = document.getElementById("detail");
  const { kind, ids } = route();
  const state = view.state;
  let children = null;
  if (kind === "agent" && ids[0]) children = await agentPane(ids[0], state);
  else if (kind === "framework" && ids[0]) children = await frameworkPane(ids[0], state);
  else if (kind === "logs" && ids.length === 2) {
    if (!fresh && box.dataset.shown === location.hash) return;
    children = await logsPane(ids[0], ids[1]);
  }
  box.hidden = children === null;
  box.dataset.shown = children === null ? "" : location.hash;
  box.replaceChildren(...(children || []));
  if (children !== null && fresh) box.scrollIntoView();
}

document.addEventListener("click", async (event) => {
  const target = event.target;
  if (target.matches && target.matches("a[data-reload]")) {
    event.preventDefault();
    await renderDetail(true);
    return;
  }
  if (!target.matches || !target.matches("#agent-actions button[data-action]")) return;
  const { action, agentId } = target.dataset;
  target.disabled = true;
  try {
    await postJSON("/api/v1/maintenance", { action, agent_ids: [agentId] });
    view.note = { agent: agentId, ok: true, text: `${action}: done` };
  } catch (error) {
    view.note = { agent: agentId, ok: false, text: `${action} refused: ${error.message}` };
  }
  view.state = await getJSON("/api/v1/state");
  await renderDetail(false);
});
