// The inspector: read-only views over the HTTP API, rendered as text
// (textContent only: stored data never becomes markup).
"use strict";

const $ = (id) => document.getElementById(id);
const keyInput = $("key");
keyInput.value = sessionStorage.getItem("memento-key") || "";
keyInput.addEventListener("change", () => sessionStorage.setItem("memento-key", keyInput.value));

async function api(path) {
  const headers = { Accept: "application/json" };
  if (keyInput.value) headers.Authorization = "Bearer " + keyInput.value;
  const res = await fetch(path, { headers });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(`${res.status} ${body.title || ""}: ${body.detail || ""} (${body.type || path})`);
  return body;
}

function show(err) { $("error").textContent = err ? String(err.message || err) : ""; }

function el(tag, text, attrs) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  Object.assign(e, attrs || {});
  return e;
}

function table(headers, rows) {
  const t = el("table");
  const hr = el("tr");
  headers.forEach((h) => hr.append(el("th", h)));
  t.append(el("thead"), el("tbody"));
  t.tHead.append(hr);
  rows.forEach((r) => {
    const tr = el("tr");
    r.forEach((c) => tr.append(el("td", c === undefined || c === null ? "" : String(c))));
    t.tBodies[0].append(tr);
  });
  return t;
}

function json(v) { return el("pre", JSON.stringify(v, null, 2)); }

const q = encodeURIComponent;

// Runs
let runsCursor = "";
async function listRuns(more) {
  show();
  const f = new FormData($("runs-form"));
  const params = new URLSearchParams({ limit: "50" });
  if (f.get("status")) params.set("status", f.get("status"));
  if (f.get("workflow")) params.set("workflow", f.get("workflow"));
  if (more && runsCursor) params.set("cursor", runsCursor);
  try {
    const page = await api("/v1/runs?" + params);
    if (!more) $("runs-list").replaceChildren();
    for (const r of page.items || []) {
      const tr = el("tr", undefined, { className: "link", title: "Show run " + r.run_id });
      [r.run_id, r.workflow_name + " " + r.workflow_version, r.status, r.state_revision, r.next_step, r.updated_at].forEach((c) => tr.append(el("td", String(c ?? ""))));
      tr.addEventListener("click", () => showRun(r.run_id));
      $("runs-list").append(tr);
    }
    runsCursor = page.next_cursor || "";
    $("runs-more").hidden = !runsCursor;
  } catch (e) { show(e); }
}

async function showRun(id) {
  show();
  const d = $("run-detail");
  d.replaceChildren(el("h2", "Run " + id));
  try {
    const [r, events, checkpoints] = await Promise.all([
      api("/v1/runs/" + q(id)),
      api("/v1/runs/" + q(id) + "/events?limit=200"),
      api("/v1/runs/" + q(id) + "/checkpoints"),
    ]);
    d.append(json(r));
    d.append(el("h2", "Events"), table(["Seq", "Type", "Step", "Attempt", "Created"],
      (events.items || []).map((e) => [e.seq, e.event_type, e.step_id, e.attempt, e.created_at])));
    d.append(el("h2", "Checkpoints"), table(["Label", "Revision", "Created"],
      (checkpoints.items || []).map((c) => [c.label, c.revision, c.created_at])));
  } catch (e) { show(e); }
}

// Sessions
async function showSession() {
  show();
  const f = new FormData($("sessions-form"));
  const id = f.get("session"), user = f.get("user");
  const d = $("session-detail");
  d.replaceChildren();
  try {
    const [s, msgs] = await Promise.all([
      api("/v1/sessions/" + q(id) + "?user_id=" + q(user)),
      api("/v1/sessions/" + q(id) + "/messages?user_id=" + q(user) + "&limit=100"),
    ]);
    d.append(el("h2", "Session " + id), json(s));
    d.append(el("h2", "Messages"), table(["Seq", "Role", "Content", "Created"],
      (msgs.items || []).map((m) => [m.seq, m.role, m.content, m.created_at])));
  } catch (e) { show(e); }
}

// Memory
async function showMemory() {
  show();
  const subject = new FormData($("memory-form")).get("subject");
  const d = $("memory-detail");
  d.replaceChildren();
  try {
    const [claims, held, profile] = await Promise.all([
      api("/v1/memories?subject_id=" + q(subject) + "&limit=100"),
      api("/v1/memories/held?subject_id=" + q(subject)),
      api("/v1/subjects/" + q(subject) + "/profile"),
    ]);
    const row = (c) => [c.namespace, c.key, JSON.stringify(c.value), c.provenance && (c.provenance.source_type + " " + c.provenance.source_id), c.valid_from, c.memory_id];
    d.append(el("h2", "Current claims"), table(["Namespace", "Key", "Value", "Source", "Valid from", "Memory"], (claims.items || []).map(row)));
    d.append(el("h2", "Held for confirmation"), table(["Namespace", "Key", "Value", "Source", "Valid from", "Memory"], (held.items || []).map(row)));
    d.append(el("h2", "Profile"), json(profile));
  } catch (e) { show(e); }
}

document.querySelectorAll("header nav button").forEach((b) => b.addEventListener("click", () => {
  document.querySelectorAll("header nav button").forEach((o) => o.removeAttribute("aria-current"));
  b.setAttribute("aria-current", "page");
  ["runs", "sessions", "memory"].forEach((v) => { $(v).hidden = v !== b.dataset.view; });
}));
$("runs-form").addEventListener("submit", (e) => { e.preventDefault(); listRuns(false); });
$("runs-more").addEventListener("click", () => listRuns(true));
$("sessions-form").addEventListener("submit", (e) => { e.preventDefault(); showSession(); });
$("memory-form").addEventListener("submit", (e) => { e.preventDefault(); showMemory(); });
listRuns(false);
