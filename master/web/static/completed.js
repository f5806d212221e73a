// fairshare dashboard: the completed tasks and the ended frameworks (/api/v1/completed: kept in
// the leading master's memory, the newest first, up to its caps). Uses el, fill, badge, ago,
// taskRow and view of dashboard.js.
"use strict";

const COMPLETED_SHOWN = 100;

async function refreshCompleted(state) {
  view.completed = await getJSON("/api/v1/completed");
  const tasks = view.completed.tasks;
  const rows = tasks.slice(0, COMPLETED_SHOWN).map((t) => {
    const row = taskRow({ ...t, updated_at: t.updated_at || t.ended_at }, state);
    row.append(el("td", { class: "muted" }, ago(t.ended_at)));
    return row;
  });
  fill(document.querySelector("#completed-tasks tbody"), rows, 7, "no task ended yet");
  const shown = tasks.length > COMPLETED_SHOWN ? `, newest ${COMPLETED_SHOWN} shown` : "";
  const cap = view.completed.max_tasks ? `; the last ${view.completed.max_tasks} are kept` : "";
  document.getElementById("completed-count").textContent = `(${tasks.length}${shown}${cap})`;
  const frameworks = view.completed.frameworks.map((f) => el("tr",
    { "data-framework-id": f.framework_id },
    el("td", {}, el("b", {}, f.name || "-")),
    el("td", { class: "id", title: f.framework_id }, f.framework_id.slice(0, 15)),
    el("td", {}, f.role || "-"),
    el("td", { class: "muted" }, f.reason || "-"),
    el("td", { class: "muted" }, ago(f.removed_at))));
  fill(document.querySelector("#ended-frameworks tbody"), frameworks, 5, "no framework ended");
}

// The completed tasks of one framework or agent, for its detail pane.
function completedOf(key, id, state) {
  const rows = view.completed.tasks.filter((t) => t[key] === id).slice(0, COMPLETED_SHOWN)
    .map((t) => taskRow({ ...t, updated_at: t.updated_at || t.ended_at }, state));
  return taskTable(rows, "no completed task");
}

function taskTable(rows, emptyText) {
  const body = el("tbody", {});
  fill(body, rows, 6, emptyText);
  return el("table", { class: "tasks" },
    el("thead", {}, el("tr", {}, ...["task", "framework", "agent", "state", "resources",
      "last status"].map((h) => el("th", {}, h)))), body);
}
