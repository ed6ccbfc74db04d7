// opemu dashboard: one SSE stream (/watch?kind=all&initial=true) feeds everything; the rest is
// the public API (/leader, /metrics, /events, .../history, /controller, /clock, /snapshot, CRUD). No build
// step.
"use strict";

const hidden = new Set(["Event", "Lease", "Namespace", "CustomResourceDefinition", "Fault", "Controller"]);
const objects = new Map(); // key → object, as the store has it
const faults = new Map(); // name → Fault, as the store has it
const hooks = new Map(); // name → Controller (controllers.opemu.dev), as the store has it
// reconciled is what the controllers reconcile, from /controller: "apiVersion|kind" →
// {plural, names}. The Application controller's and every Controller's (reconcile hooks).
let reconciled = new Map();
const previous = new Map(); // key → the state before its last change
const timeline = [];
let selected = null;
let source = null;

const $ = (id) => document.getElementById(id);
const keyOf = (o) => `${o.apiVersion}|${o.kind}|${o.metadata.namespace || ""}|${o.metadata.name}`;
const plural = (o) => (reconciled.get(`${o.apiVersion}|${o.kind}`) || {}).plural || (o.kind === "Application" ? "applications" : o.kind.toLowerCase() + "s");
// pathOf is the object's URL: /apis/group/version (/api/v1 for the core group), namespaced or not.
const pathOf = (o) => {
  const base = o.apiVersion.includes("/") ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  const ns = o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : "";
  return `${base}${ns}/${plural(o)}/${o.metadata.name}`;
};
const controllersOf = (o) => (reconciled.get(`${o.apiVersion}|${o.kind}`) || {}).names || [];
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

// toLogin sends the page to the token prompt when the server asks for credentials (it runs with
// TOKEN or TOKEN_FILE and the cookie is missing, expired or for another token).
function toLogin(r) {
  if (r.status === 401) location.assign("/ui/login");
  return r;
}

function setConn(state) {
  $("conn").textContent = state;
  $("conn").dataset.state = state;
}

// connect opens the stream. The browser resumes by itself after a network error (sending
// Last-Event-ID); when the server cannot resume (it restarted, or we fell behind) it sends an
// ERROR frame with an empty id: then we drop everything and re-list with initial=true.
function connect() {
  if (source) source.close();
  objects.clear();
  previous.clear();
  faults.clear();
  hooks.clear();
  render();
  renderFaults();
  renderHooks();
  source = new EventSource("/watch?kind=all&initial=true");
  source.onopen = () => setConn("live");
  source.onerror = () => {
    setConn("reconnecting");
    fetch("/version").then(toLogin).catch(() => {});
  };
  source.onmessage = (m) => handle(JSON.parse(m.data), m.lastEventId);
}

function handle(ev, id) {
  if (ev.type === "ERROR") {
    addTimeline("ERROR", "Status", ev.object.reason || "", ev.object.message || "", "");
    setConn("re-listing");
    source.close();
    setTimeout(connect, 300);
    return;
  }
  const o = ev.object;
  const k = keyOf(o);
  addTimeline(ev.type, o.kind, o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name, "", id);
  if (o.kind === "Fault") {
    if (ev.type === "DELETED") faults.delete(o.metadata.name);
    else faults.set(o.metadata.name, o);
    renderFaults();
  }
  if (o.kind === "Controller" && o.apiVersion.startsWith("controllers.opemu.dev/")) {
    if (ev.type === "DELETED") hooks.delete(o.metadata.name);
    else hooks.set(o.metadata.name, o);
    renderHooks();
  }
  if (hidden.has(o.kind)) return;
  if (ev.type === "DELETED") {
    objects.delete(k);
  } else {
    if (objects.has(k)) previous.set(k, objects.get(k));
    objects.set(k, o);
  }
  render();
}

function addTimeline(type, kind, name, message, rv) {
  timeline.unshift({ type, kind, name, message, rv, at: new Date().toLocaleTimeString() });
  if (timeline.length > 300) timeline.pop();
  renderTimeline();
}

function renderTimeline() {
  const f = $("filter").value.toLowerCase();
  $("timeline").innerHTML = timeline
    .filter((t) => !f || `${t.type} ${t.kind} ${t.name}`.toLowerCase().includes(f))
    .map((t) => `<li class="t-${t.type}">${t.at} <b>${t.type}</b> ${esc(t.kind)} ${esc(t.name)} ${t.rv ? "rv " + esc(t.rv) : ""} ${esc(t.message)}</li>`)
    .join("");
}

function render() {
  const rows = [...objects.values()].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  $("objects").querySelector("tbody").innerHTML = rows
    .map((o) => {
      const st = o.status || {};
      const spec = o.spec || {};
      const phase = st.phase || "";
      const by = controllersOf(o).filter((n) => n !== "application");
      const hooked = by.length ? ` <small class="hooked" title="reconciled by the hook of Controller ${esc(by.join(", "))}">⟲ ${esc(by.join(", "))}</small>` : "";
      return `<tr data-key="${esc(keyOf(o))}" data-name="${esc(o.metadata.name)}" data-phase="${esc(phase)}" data-hooked="${esc(by.join(","))}" class="${selected === keyOf(o) ? "selected" : ""}">
        <td>${esc(o.kind)}${hooked}</td><td>${esc(o.metadata.namespace)}</td><td>${esc(o.metadata.name)}</td>
        <td class="phase phase-${esc(phase)}">${esc(phase)}</td>
        <td class="ready">${esc(st.readyReplicas ?? "-")} / ${esc(spec.replicas ?? "-")}</td>
        <td>${esc(o.metadata.generation)} / ${esc(st.observedGeneration ?? "-")}</td>
        <td>${esc((o.metadata.finalizers || []).join(", "))}</td>
        <td>${o.metadata.deletionTimestamp ? "yes" : ""}</td></tr>`;
    })
    .join("");
  renderDetail();
}

function renderDetail() {
  const o = selected && objects.get(selected);
  $("detail").hidden = !o;
  if (!o) return;
  $("detail-title").textContent = `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`;
  $("spec").textContent = JSON.stringify(o.spec, null, 2);
  $("status").textContent = JSON.stringify(o.status || {}, null, 2);
  $("conditions").querySelector("tbody").innerHTML = ((o.status || {}).conditions || [])
    .map((c) => `<tr><td>${esc(c.type)}</td><td>${esc(c.status)}</td><td>${esc(c.reason)}</td><td>${esc(c.lastTransitionTime)}</td></tr>`)
    .join("");
  $("diff").innerHTML = diff(previous.get(selected), o);
}

// diff is a line diff of the object's last change (lines only in one side are marked).
function diff(a, b) {
  if (!a) return "(no change seen yet)";
  const strip = (o) => JSON.stringify({ ...o, metadata: { ...o.metadata, resourceVersion: undefined, managedFields: undefined } }, null, 2).split("\n");
  const before = strip(a);
  const after = strip(b);
  const inBefore = new Set(before);
  const inAfter = new Set(after);
  const out = [];
  before.forEach((l) => { if (!inAfter.has(l)) out.push(`<span class="diff-del">- ${esc(l.trim())}</span>`); });
  after.forEach((l) => { if (!inBefore.has(l)) out.push(`<span class="diff-add">+ ${esc(l.trim())}</span>`); });
  return out.length ? out.join("\n") : "(metadata only)";
}

async function refreshDetail() {
  const o = selected && objects.get(selected);
  if (!o) return;
  if (controllersOf(o).length) {
    const h = await (await fetch(pathOf(o) + "/history")).json().catch(() => ({ items: [] }));
    // Newest first. A pass that found nothing to do (a resync, or "Reconcile now" on a converged
    // object) is recorded too, and shown muted. A hook's attempts name their Controller.
    $("history").querySelector("tbody").innerHTML = (h.items || []).slice().reverse()
      .map((a) => `<tr class="${a.success && String(a.message).startsWith("nothing to do") ? "idle" : ""}" data-controller="${esc(a.controller || "application")}"><td>${esc(a.startTime)}</td><td>${esc(a.controller || "application")}${a.attempt > 1 ? ` (attempt ${esc(a.attempt)})` : ""}</td><td>${esc(a.generation)}</td><td>${a.success ? "✔" : "✘"}</td><td>${esc(a.phase)}</td><td>${esc(a.message)}</td><td>${esc(a.duration)}</td></tr>`)
      .join("");
  } else {
    $("history").querySelector("tbody").innerHTML = "";
  }
  const e = await (await fetch(`/events?namespace=${encodeURIComponent(o.metadata.namespace)}&name=${encodeURIComponent(o.metadata.name)}&limit=30`)).json();
  $("events").querySelector("tbody").innerHTML = (e.events || []).slice().reverse()
    .map((v) => `<tr><td>${esc(v.lastTimestamp)}</td><td>${esc(v.type)}</td><td>${esc(v.severity)}</td><td>${esc(v.reason)}</td><td>${esc(v.count)}</td><td>${esc(v.message)}</td></tr>`)
    .join("");
}

async function refreshController() {
  try {
    const l = await toLogin(await fetch("/leader")).json();
    $("leader").textContent = l.electionEnabled ? `${l.leader || "none"}${l.isLeader ? " (this replica)" : ""}` : `${l.identity} (no election)`;
    $("replica").textContent = l.identity;
    $("store").textContent = l.store || "memory";
    const text = await (await fetch("/metrics")).text();
    const sum = (name) => text.split("\n").filter((x) => x.startsWith(name + "{") || x.startsWith(name + " "))
      .reduce((s, x) => s + Number(x.split(" ").pop()), 0);
    $("depth").textContent = sum("workqueue_depth");
    const total = sum("controller_reconcile_total");
    const now = Date.now();
    if (refreshController.last) {
      const [t0, n0] = refreshController.last;
      $("rate").textContent = ((total - n0) / ((now - t0) / 1000)).toFixed(1);
    }
    refreshController.last = [now, total];
    $("errors").textContent = sum("controller_reconcile_errors_total");
  } catch (err) {
    $("leader").textContent = "unreachable";
    $("replica").textContent = "unreachable";
  }
}

async function call(method, path, body, type = "application/json") {
  const r = toLogin(await fetch(path, { method, headers: body ? { "Content-Type": type } : {}, body: body ? JSON.stringify(body) : undefined }));
  const data = await r.json().catch(() => ({}));
  const msg = $("message");
  msg.className = r.ok ? "" : "error";
  msg.textContent = r.ok ? `${method} ${path}: ${r.status}` : `${r.status} ${data.reason || ""}: ${data.message || ""}`;
  refreshDetail();
  return r.ok;
}

const patch = (o, body) => call("PATCH", pathOf(o), body, "application/merge-patch+json");

$("create").addEventListener("submit", (e) => {
  e.preventDefault();
  const ns = $("new-namespace").value || "default";
  const md = { name: $("new-name").value };
  if ($("new-fail").checked) md.annotations = { "cloudnative.elide.dev/simulate-failures": "3" };
  call("POST", `/apis/cloudnative.elide.dev/v1/namespaces/${ns}/applications`, {
    apiVersion: "cloudnative.elide.dev/v1", kind: "Application", metadata: md,
    spec: { replicas: Number($("new-replicas").value), image: $("new-image").value },
  });
});
$("objects").addEventListener("click", (e) => {
  const tr = e.target.closest("tr[data-key]");
  if (!tr) return;
  selected = tr.dataset.key;
  const o = objects.get(selected);
  $("scale-to").value = (o.spec || {}).replicas ?? "";
  $("image-to").value = (o.spec || {}).image ?? "";
  render();
  refreshDetail();
});
$("scale").onclick = () => patch(objects.get(selected), { spec: { replicas: Number($("scale-to").value) } });
$("set-image").onclick = () => patch(objects.get(selected), { spec: { image: $("image-to").value } });
$("toggle-fail").onclick = () => {
  const o = objects.get(selected);
  const on = (o.metadata.annotations || {})["cloudnative.elide.dev/simulate-failures"];
  patch(o, { metadata: { annotations: { "cloudnative.elide.dev/simulate-failures": on ? null : "3" } } });
};
// The reconcile runs after the 202: look at the history again shortly, so its pass shows at once.
$("reconcile").onclick = async () => {
  if (await call("POST", pathOf(objects.get(selected)) + "/reconcile")) {
    $("message").textContent += " (queued; the pass appears in the reconcile history)";
    setTimeout(refreshDetail, 200);
    setTimeout(refreshDetail, 800);
  }
};
$("delete").onclick = () => call("DELETE", pathOf(objects.get(selected)));
$("filter").addEventListener("input", renderTimeline);

// The controller loop (SPEC §16): pause, step, resume, the queue and the clock.

// parseTime reads the server's RFC 3339 times, whose nanoseconds Date does not take.
const parseTime = (s) => Date.parse(String(s).replace(/(\.\d{3})\d+/, "$1"));
const ago = (due, now) => {
  const ms = parseTime(due) - parseTime(now);
  return ms <= 0 ? "now" : `in ${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)}s`;
};

async function refreshLoop() {
  try {
    const c = await toLogin(await fetch("/controller")).json();
    const ctrls = c.controllers || [];
    const next = new Map();
    for (const x of ctrls) {
      if (!x.kind) continue;
      const k = `${x.apiVersion}|${x.kind}`;
      const r = next.get(k) || { plural: x.resource.split(".")[0], names: [] };
      r.names.push(x.name);
      next.set(k, r);
    }
    const changed = JSON.stringify([...next]) !== JSON.stringify([...reconciled]);
    reconciled = next;
    if (changed) render();
    const state = ctrls.length === 0 ? "disabled" : ctrls.some((x) => x.paused) ? "paused" : ctrls.some((x) => x.running) ? "running" : "not leading";
    $("loop-state").textContent = state;
    $("loop-state").dataset.state = state;
    $("queue").querySelector("tbody").innerHTML = ctrls
      .flatMap((x) => x.queue.map((q) => `<tr data-object="${esc(q.object)}" data-state="${esc(q.state)}">
        <td>${esc(x.name)}</td><td>${esc(q.object)}</td><td>${esc(q.state)}</td><td title="${esc(q.due)}">${q.due ? esc(ago(q.due, c.now)) : ""}</td><td>${esc(q.failures)}</td></tr>`))
      .join("");
    const k = await (await fetch("/clock")).json();
    $("clock-now").textContent = new Date(parseTime(k.now)).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
    $("clock-now").title = k.now;
    $("clock-mode").textContent = `(${k.mode})`;
    $("clock-mode").dataset.mode = k.mode;
    $("advance").disabled = k.mode !== "manual";
    $("advance").title = k.mode === "manual" ? "move the manual clock forward" : "the clock is real: start opemu with CLOCK=manual";
  } catch (err) {
    $("loop-state").textContent = "unreachable";
  }
}

// loopCall POSTs to a loop route and shows its answer in #step-result.
async function loopCall(path, body) {
  const r = toLogin(await fetch(path, { method: "POST", headers: body ? { "Content-Type": "application/json" } : {}, body: body ? JSON.stringify(body) : undefined }));
  const data = await r.json().catch(() => ({}));
  const out = $("step-result");
  out.className = r.ok ? "" : "error";
  if (!r.ok) out.textContent = `${r.status} ${data.reason || ""}: ${data.message || ""}`;
  else if (data.step) {
    const s = data.step;
    out.textContent = `stepped ${s.controller} ${s.object}: ${s.result}${s.error ? " (" + s.error + ")" : ""}${s.requeueAfter ? ", requeue after " + s.requeueAfter : ""}, took ${s.duration}`;
  } else if (data.mode) out.textContent = `clock moved to ${data.now}`;
  else out.textContent = `${path}: ${r.status}`;
  refreshLoop();
  refreshDetail();
}

$("pause").onclick = () => loopCall("/controller/pause");
$("resume").onclick = () => loopCall("/controller/resume");
$("step").onclick = () => loopCall("/controller/step");
$("advance").onclick = () => loopCall("/clock/advance", { by: $("advance-by").value });

// Snapshots (SPEC §23): the state saved into the page (and offered as a file), and put back.
// The restore ends the stream with an ERROR (410), and the page re-lists like after a restart.

let saved = null; // the last snapshot saved from this page: its text
let savedURL = null;

function snapResult(ok, text) {
  $("snap-result").className = ok ? "" : "error";
  $("snap-result").textContent = text;
}

async function snapError(r) {
  const data = await r.json().catch(() => ({}));
  snapResult(false, `${r.status} ${data.reason || ""}: ${data.message || ""}`);
}

$("snap-save").onclick = async () => {
  const r = toLogin(await fetch("/snapshot", { method: "POST" }));
  if (!r.ok) return snapError(r);
  saved = await r.text();
  const header = (saved.match(/^# opemu snapshot: (.*)$/m) || [])[1] || "";
  const name = ((r.headers.get("Content-Disposition") || "").match(/filename="([^"]+)"/) || [])[1] || "opemu-snapshot.yaml";
  if (savedURL) URL.revokeObjectURL(savedURL);
  savedURL = URL.createObjectURL(new Blob([saved], { type: "application/yaml" }));
  $("snap-download").href = savedURL;
  $("snap-download").download = name;
  $("snap-download").textContent = `download ${name}`;
  $("snap-download").hidden = false;
  $("snap-reset").disabled = false;
  snapResult(true, `saved ${header}`);
};

async function restore(body) {
  const r = toLogin(await fetch("/snapshot/restore", { method: "POST", headers: { "Content-Type": "application/yaml" }, body }));
  if (!r.ok) return snapError(r);
  const res = await r.json();
  snapResult(true, `restored ${res.objects} objects at resourceVersion ${res.resourceVersion}${res.clockRestored ? ", clock set to " + res.clock : ""}`);
  refreshLoop();
}

$("snap-reset").onclick = () => saved && restore(saved);
$("snap-file").onchange = async () => {
  const f = $("snap-file").files[0];
  if (!f) return;
  await restore(await f.text());
  $("snap-file").value = "";
};

// Faults (SPEC §16): the stored Faults, from the stream; created and deleted through the API.

const faultsPath = "/apis/faults.opemu.dev/v1/faults";

function renderFaults() {
  const rows = [...faults.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  $("fault-list").querySelector("tbody").innerHTML = rows
    .map((f) => {
      const sp = f.spec || {};
      const m = sp.match || {};
      const a = sp.action || {};
      const st = f.status || {};
      const matches = [(m.verbs || []).join(",") || "every verb", m.resource || "every resource", m.subresource ? "/" + m.subresource : "", m.name ? `name ${m.name}` : ""].filter(Boolean).join(" ");
      const does = [a.status ? `status ${a.status}` : "", a.delay ? `delay ${a.delay}` : "", a.watch ? `watch ends after ${a.watch.closeAfter || "0s"}${a.watch.expire ? " (410)" : ""}` : "",
        sp.every ? `every ${sp.every}` : "", sp.probability !== undefined ? `p=${sp.probability}` : "", sp.count ? `count ${sp.count}` : ""].filter(Boolean).join(", ");
      const phase = st.phase || "";
      return `<tr data-fault="${esc(f.metadata.name)}" data-phase="${esc(phase)}">
        <td>${esc(f.metadata.name)}</td><td>${esc(matches)}</td><td>${esc(does)}</td><td class="injected">${esc(st.injected ?? 0)}</td>
        <td class="fault-${esc(phase)}" title="${esc(st.message || "")}">${esc(phase)}</td>
        <td><button class="danger fault-delete" data-name="${esc(f.metadata.name)}">Delete</button></td></tr>`;
    })
    .join("");
}

// Reconcile hooks (SPEC §15): the Controller objects, from the stream; what each reconciles,
// with which hook, and whether it runs (its status, written by the leader).

function renderHooks() {
  const rows = [...hooks.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  $("hook-list").querySelector("tbody").innerHTML = rows
    .map((c) => {
      const sp = c.spec || {};
      const r = sp.resource || {};
      const st = c.status || {};
      const ready = (st.conditions || []).find((x) => x.type === "Ready") || {};
      const children = (sp.children || []).map((x) => x.kind || x.resource).join(", ");
      return `<tr data-controller="${esc(c.metadata.name)}" data-phase="${esc(st.phase || "")}">
        <td>${esc(c.metadata.name)}</td><td>${esc([r.group, r.version].filter(Boolean).join("/"))} ${esc(r.plural)}</td>
        <td>${esc((sp.hook || {}).url)}</td><td>${esc(children)}${sp.finalize ? " (finalizes)" : ""}</td>
        <td class="fault-${esc(st.phase || "")}">${esc(st.phase || "")}</td><td>${esc(ready.message || "")}</td></tr>`;
    })
    .join("");
}

$("fault-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const match = {};
  const verbs = $("fault-verbs").value.split(",").map((v) => v.trim()).filter(Boolean);
  if (verbs.length) match.verbs = verbs;
  if ($("fault-resource").value.trim()) match.resource = $("fault-resource").value.trim();
  const action = {};
  if ($("fault-status").value) action.status = Number($("fault-status").value);
  if ($("fault-delay").value.trim()) action.delay = $("fault-delay").value.trim();
  const spec = { match, action };
  if ($("fault-count").value) spec.count = Number($("fault-count").value);
  call("POST", faultsPath, { apiVersion: "faults.opemu.dev/v1", kind: "Fault", metadata: { name: $("fault-name").value }, spec });
});
$("fault-list").addEventListener("click", (e) => {
  const b = e.target.closest("button.fault-delete");
  if (b) call("DELETE", `${faultsPath}/${encodeURIComponent(b.dataset.name)}`);
});

connect();
refreshController();
refreshLoop();
setInterval(refreshController, 2000);
setInterval(refreshDetail, 2000);
setInterval(refreshLoop, 1000);
