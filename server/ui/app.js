// opemu dashboard: one SSE stream (/watch?kind=all&initial=true) feeds everything; the rest is
// the public API (/leader, /metrics, /events, .../history, /controller, /clock, /snapshot, CRUD). No build
// step.
"use strict";

const hidden = new Set(["Event", "Lease", "Namespace", "CustomResourceDefinition", "Fault", "Controller"]);
// background is the traffic the cluster makes to keep itself alive (leader and node Leases
// renewed every few seconds, Node heartbeats): hidden from the timeline unless asked for.
const background = new Set(["Lease", "Node"]);
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
// startRV is the store's version when the stream was opened: what the stream sends at or
// below it is the snapshot of what was already there (initial=true), not news.
let startRV = 0;
let snapshot = 0; // how many objects the snapshot held
// follow: select the next Application this page creates (or, with nothing selected, the next
// one anybody creates), so its loop is told from its first event.
let follow = null;

const $ = (id) => document.getElementById(id);
const keyOf = (o) => `${o.apiVersion}|${o.kind}|${o.metadata.namespace || ""}|${o.metadata.name}`;
const nameOf = (o) => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name);
const plural = (o) => (reconciled.get(`${o.apiVersion}|${o.kind}`) || {}).plural || (o.kind === "Application" ? "applications" : o.kind.toLowerCase() + "s");
// pathOf is the object's URL: /apis/group/version (/api/v1 for the core group), namespaced or not.
const pathOf = (o) => {
  const base = o.apiVersion.includes("/") ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  const ns = o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : "";
  return `${base}${ns}/${plural(o)}/${o.metadata.name}`;
};
const controllersOf = (o) => (reconciled.get(`${o.apiVersion}|${o.kind}`) || {}).names || [];
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const rvOf = (o) => Number((o && o.metadata && o.metadata.resourceVersion) || 0);

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
// ERROR frame with an empty id: then we drop everything and re-list with initial=true. The
// store's current version, read first, tells the snapshot from what happens next.
async function connect() {
  if (source) source.close();
  objects.clear();
  previous.clear();
  faults.clear();
  hooks.clear();
  story.reset();
  document.dispatchEvent(new Event("opemu:relist"));
  render();
  renderFaults();
  renderHooks();
  startRV = 0;
  snapshot = 0;
  try {
    const l = await toLogin(await fetch("/api/v1/namespaces?limit=1")).json();
    startRV = Number((l.metadata || {}).resourceVersion || 0);
  } catch (err) {
    startRV = 0; // every event is then news
  }
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
    addTimeline({ type: "ERROR", kind: "Status", name: ev.object.reason || "", text: ev.object.message || "" });
    setConn("re-listing");
    source.close();
    setTimeout(connect, 300);
    return;
  }
  const o = ev.object;
  // The panels in their own files (tree.js) follow the same stream.
  document.dispatchEvent(new CustomEvent("opemu:watch", { detail: ev }));
  const k = keyOf(o);
  const old = objects.get(k) || previous.get(k);
  const news = !(ev.type === "ADDED" && startRV && Number(id) <= startRV);
  if (news) {
    addTimeline({ type: ev.type, kind: o.kind, name: nameOf(o), text: describe(ev.type, o, objects.get(k)), rv: id, bg: background.has(o.kind) });
  } else {
    snapshot++;
    renderTimelineNote();
  }
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
  if (news && ev.type === "ADDED" && o.kind === "Application" && (follow === k || (follow === "*" && !selected))) {
    follow = null;
    select(k);
  }
  if (k === selected || (ev.type === "DELETED" && k === story.key)) story.watched(ev.type, o, old, news);
  if (news && k === selected) refreshLoopSoon();
  render();
}

// describe says in a few words what a watch event changed.
function describe(type, o, old) {
  if (o.kind === "Event") {
    const io = o.involvedObject || o.regarding || {};
    return `${o.type || ""} ${o.reason || ""} on ${io.kind || ""} ${io.namespace ? io.namespace + "/" : ""}${io.name || ""}: ${o.message || o.note || ""}${o.count > 1 ? ` (×${o.count})` : ""}`;
  }
  if (type !== "MODIFIED" || !old) return "";
  return changes(old, o).join(", ");
}

// changes lists what differs between two versions of an object, in words.
function changes(a, b) {
  const out = [];
  const am = a.metadata || {}, bm = b.metadata || {};
  if (am.generation !== bm.generation) out.push(`spec changed (generation ${am.generation} → ${bm.generation}${specChange(a.spec, b.spec)})`);
  const af = (am.finalizers || []).join(","), bf = (bm.finalizers || []).join(",");
  if (af !== bf) out.push(`finalizers [${af}] → [${bf}]`);
  for (const [field, x, y] of [["annotation", am.annotations || {}, bm.annotations || {}], ["label", am.labels || {}, bm.labels || {}]]) {
    for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) {
      if (x[k] !== y[k] && k !== "kubectl.kubernetes.io/last-applied-configuration") out.push(`${field} ${k}: ${x[k] === undefined ? "–" : JSON.stringify(x[k])} → ${y[k] === undefined ? "–" : JSON.stringify(y[k])}`);
    }
  }
  if (!am.deletionTimestamp && bm.deletionTimestamp) out.push("deletion requested (deletionTimestamp set)");
  const as = a.status || {}, bs = b.status || {};
  const st = [];
  for (const f of ["phase", "readyReplicas", "replicas", "observedGeneration"]) {
    if (as[f] !== bs[f]) st.push(`${f} ${as[f] ?? "–"} → ${bs[f] ?? "–"}`);
  }
  const conds = (s) => Object.fromEntries((s.conditions || []).map((c) => [c.type, c]));
  const ac = conds(as), bc = conds(bs);
  for (const t of new Set([...Object.keys(ac), ...Object.keys(bc)])) {
    const x = ac[t] || {}, y = bc[t] || {};
    if (x.status !== y.status || x.reason !== y.reason) st.push(`${t}=${y.status ? y.status + (y.reason ? " " + y.reason : "") : "–"}`);
    else if (x.message !== y.message) st.push(`${t} message ${JSON.stringify(x.message ?? "")} → ${JSON.stringify(y.message ?? "")}`);
  }
  if (st.length) out.push(`status: ${st.join(", ")}`);
  else if (JSON.stringify(as) !== JSON.stringify(bs)) out.push("status changed");
  return out;
}

function specChange(a = {}, b = {}) {
  const d = [];
  for (const f of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (JSON.stringify(a[f]) !== JSON.stringify(b[f])) d.push(`${f} ${JSON.stringify(a[f]) ?? "–"} → ${JSON.stringify(b[f]) ?? "–"}`);
  }
  return d.length ? `: ${d.join(", ")}` : "";
}

function addTimeline(t) {
  timeline.unshift({ ...t, at: new Date().toLocaleTimeString() });
  if (timeline.length > 300) timeline.pop();
  renderTimeline();
}

function renderTimeline() {
  const f = $("filter").value.toLowerCase();
  const bg = $("show-background").checked;
  let hiddenBg = 0;
  $("timeline").innerHTML = timeline
    .filter((t) => {
      if (t.bg && !bg) {
        hiddenBg++;
        return false;
      }
      return !f || `${t.type} ${t.kind} ${t.name} ${t.text}`.toLowerCase().includes(f);
    })
    .map((t) => `<li class="t-${t.type}${t.bg ? " bg" : ""}" data-kind="${esc(t.kind)}"><span class="when">${t.at}</span> <b>${t.type}</b> ${esc(t.kind)} ${esc(t.name)}${t.text ? ` <span class="what">${esc(t.text)}</span>` : ""}${t.rv ? " " + rvTag(t.rv) : ""}</li>`)
    .join("");
  renderTimelineNote(hiddenBg);
}

function renderTimelineNote(hiddenBg) {
  if (hiddenBg === undefined) hiddenBg = timeline.filter((t) => t.bg).length * !$("show-background").checked;
  const parts = [];
  if (snapshot) parts.push(`${snapshot} objects were already in the store when this page opened (not shown)`);
  if (hiddenBg) parts.push(`${hiddenBg} background events hidden`);
  $("timeline-note").textContent = parts.join("; ");
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
      const cls = [selected === keyOf(o) ? "selected" : "", controllersOf(o).length || o.kind === "Application" ? "" : "other"].join(" ").trim();
      return `<tr data-key="${esc(keyOf(o))}" data-name="${esc(o.metadata.name)}" data-phase="${esc(phase)}" data-hooked="${esc(by.join(","))}" class="${cls}">
        <td>${esc(o.kind)}${hooked}</td><td>${esc(o.metadata.namespace)}</td><td>${esc(o.metadata.name)}</td>
        <td class="phase phase-${esc(phase)}">${esc(phase)}</td>
        <td class="ready">${esc(st.readyReplicas ?? "-")} / ${esc(spec.replicas ?? "-")}</td>
        <td>${esc(o.metadata.generation)} / ${esc(st.observedGeneration ?? "-")}</td>
        <td>${esc((o.metadata.finalizers || []).join(", "))}</td>
        <td>${o.metadata.deletionTimestamp ? "yes" : ""}</td></tr>`;
    })
    .join("");
  $("objects-empty").hidden = rows.some((o) => o.kind === "Application");
  renderDetail();
  story.render();
}

function renderDetail() {
  const o = selected && objects.get(selected);
  $("detail").hidden = !o;
  if (!o) return;
  $("detail-title").textContent = `${o.kind} ${nameOf(o)}`;
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

// fetchHistory returns the reconcile passes of o, oldest first ([] for objects no controller
// keeps a history of).
async function fetchHistory(o) {
  if (!controllersOf(o).length) return [];
  const h = await (await fetch(pathOf(o) + "/history")).json().catch(() => ({ items: [] }));
  return h.items || [];
}

async function refreshDetail() {
  const o = selected && objects.get(selected);
  if (!o) return;
  const items = await fetchHistory(o);
  story.passes(selected, items);
  // Newest first. A pass that found nothing to do (a resync, or "Reconcile now" on a converged
  // object) is recorded too, and shown muted. A hook's attempts name their Controller.
  $("history").querySelector("tbody").innerHTML = items.slice().reverse()
    .map((a) => `<tr class="${a.success && String(a.message).startsWith("nothing to do") ? "idle" : ""}" data-controller="${esc(a.controller || "application")}"><td>${esc(a.startTime)}</td><td>${esc(a.controller || "application")}${a.attempt > 1 ? ` (attempt ${esc(a.attempt)})` : ""}</td><td>${esc(a.generation)}</td><td>${a.success ? "✔" : "✘"}</td><td>${esc(a.phase)}</td><td>${esc(a.message)}</td><td>${esc(a.duration)}</td></tr>`)
    .join("");
  const e = await (await fetch(`/events?namespace=${encodeURIComponent(o.metadata.namespace || "")}&name=${encodeURIComponent(o.metadata.name)}&limit=30`)).json();
  $("events").querySelector("tbody").innerHTML = (e.events || []).slice().reverse()
    .map((v) => `<tr><td>${esc(v.lastTimestamp)}</td><td>${esc(v.type)}</td><td>${esc(v.severity)}</td><td>${esc(v.reason)}</td><td>${esc(v.count)}</td><td>${esc(v.message)}</td></tr>`)
    .join("");
}

// refreshSoon refreshes the detail (and so the story) shortly after a change of the selected
// object: the reconcile that follows a watch event is in the history a moment later.
let refreshTimer = null;
function refreshSoon() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => {
    refreshTimer = null;
    refreshDetail();
  }, 120);
}

// refreshLoopSoon asks /controller again shortly after a change of the selected object, so
// "right now" follows the queue closely.
let loopTimer = null;
function refreshLoopSoon() {
  if (loopTimer) return;
  loopTimer = setTimeout(() => {
    loopTimer = null;
    refreshLoop();
  }, 150);
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

function select(k) {
  selected = k;
  const o = objects.get(selected);
  $("scale-to").value = (o.spec || {}).replicas ?? "";
  $("image-to").value = (o.spec || {}).image ?? "";
  story.follow(k, o);
  render();
  refreshDetail();
}

$("create").addEventListener("submit", (e) => {
  e.preventDefault();
  const ns = $("new-namespace").value || "default";
  const md = { name: $("new-name").value };
  if ($("new-fail").checked) md.annotations = { "cloudnative.elide.dev/simulate-failures": "3" };
  follow = `cloudnative.elide.dev/v1|Application|${ns}|${md.name}`;
  call("POST", `/apis/cloudnative.elide.dev/v1/namespaces/${ns}/applications`, {
    apiVersion: "cloudnative.elide.dev/v1", kind: "Application", metadata: md,
    spec: { replicas: Number($("new-replicas").value), image: $("new-image").value },
  });
});
$("objects").addEventListener("click", (e) => {
  const tr = e.target.closest("tr[data-key]");
  if (tr) select(tr.dataset.key);
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
  story.asked = Date.now();
  if (await call("POST", pathOf(objects.get(selected)) + "/reconcile")) {
    $("message").textContent += " (queued; the pass appears in the reconcile history)";
    setTimeout(refreshDetail, 200);
    setTimeout(refreshDetail, 800);
  }
};
$("delete").onclick = () => call("DELETE", pathOf(objects.get(selected)) + `?propagationPolicy=${$("cascade").value}`);
$("filter").addEventListener("input", renderTimeline);
$("show-background").addEventListener("change", renderTimeline);

// The loop, step by step: the story of the selected object, told from what the server shows
// of it. The watch stream gives every version of the object; the history (.../history) gives
// every reconcile pass, with the version it read and the versions its writes produced; the
// queue view (/controller) says what the controller plans next. Ordered by resourceVersion,
// which the store hands out in the order things happen, they tell the loop: watch event →
// key queued → reconcile (what it read, what it wrote) → status observed → requeue or done.
const story = {
  key: null,
  name: "",
  versions: new Map(), // rv → the object at that version, as the watch delivered it
  watch: [], // {rv, type, obj, old, news, at}
  history: [], // the passes, oldest first
  queue: null, // this key's queue item, from /controller
  dropped: false, // given up on after MAX_RETRIES
  paused: false,
  since: 0, // the version the object had when the page started following it
  asked: 0, // when this page last asked for a reconcile (Reconcile now)

  reset() {
    this.key = null;
    this.versions.clear();
    this.watch = [];
    this.history = [];
    this.queue = null;
    this.dropped = false;
  },

  follow(k, o) {
    if (this.key === k) return;
    this.reset();
    this.key = k;
    this.name = `${o.kind} ${nameOf(o)}`;
    this.since = rvOf(o);
    this.versions.set(rvOf(o), o);
  },

  watched(type, o, old, news) {
    if (this.key !== keyOf(o)) return;
    this.versions.set(rvOf(o), o);
    if (this.versions.size > 200) this.versions.delete(this.versions.keys().next().value);
    if (news) {
      this.watch.push({ rv: rvOf(o), type, obj: o, old, at: new Date().toLocaleTimeString() });
      if (this.watch.length > 200) this.watch.shift();
    }
    refreshSoon();
  },

  passes(k, items) {
    if (this.key !== k) return;
    this.history = items;
    this.render();
  },

  queued(item, dropped, paused) {
    this.queue = item;
    this.dropped = dropped;
    this.paused = paused;
    this.render();
  },

  // writer returns the pass whose write produced version rv, and its number.
  writer(rv) {
    for (let i = 0; i < this.history.length; i++) {
      for (const w of this.history[i].wrote || []) if (Number(w.resourceVersion) === rv) return [this.history[i], i + 1];
    }
    return [null, 0];
  },

  render() {
    const subject = $("story-subject");
    const list = $("story");
    if (!this.key) {
      subject.textContent = "select an object above to follow it";
      list.innerHTML = "";
      $("story-now").textContent = "";
      $("story-empty").hidden = false;
      $("story-legend").hidden = true;
      return;
    }
    $("story-empty").hidden = true;
    $("story-legend").hidden = false;
    subject.textContent = `for ${this.name}, as it happens (oldest first)`;
    $("story-now").innerHTML = this.now();
    // Oldest first. A pass sorts just after the version it read (it happened after that
    // version was stored, and before anything it wrote); a watch event by its version. The
    // watch events of a pass's own writes are told inside that pass. A hook's passes name no
    // version: they come last, in their order.
    const items = [];
    this.watch.forEach((w, i) => {
      if (!this.writer(w.rv)[0]) items.push({ at: w.rv, rank: 0, seq: i, kind: "watch", w });
    });
    this.history.forEach((p, i) => items.push({ at: p.resourceVersion ? Number(p.resourceVersion) : Number.MAX_SAFE_INTEGER, rank: 1, seq: i, kind: "pass", p, n: i + 1 }));
    items.sort((a, b) => a.at - b.at || a.rank - b.rank || a.seq - b.seq);
    let lastPass = -1;
    items.forEach((it, i) => { if (it.kind === "pass") lastPass = i; });
    const html = items.map((it, i) => (it.kind === "watch" ? this.watchItem(it.w) : this.passItem(it.p, it.n, this.cause(items, i), i === lastPass, this.history[it.n])));
    const shown = 40;
    const cut = html.length > shown ? `<li class="s-more">… ${html.length - shown} earlier steps (the reconcile history below has them all)</li>` : "";
    list.innerHTML = cut + html.slice(-shown).join("");
  },

  // now says what the controller plans for the object right now, from the queue view.
  now() {
    const q = this.queue;
    if (this.dropped) return `<b>Given up.</b> After repeated failures the controller dropped the key: it stays as it is until its spec or annotations change (or you press Reconcile now).`;
    if (!q) return this.history.length ? `<b>Right now: not in the queue.</b> The controller has nothing planned for it; it reconciles again when the object changes (or at the periodic resync).` : `<b>Right now: not in the queue.</b>`;
    const due = q.due ? ago(q.due, q.now) : "";
    const fails = q.failures ? ` (a retry after ${q.failures} failure${q.failures > 1 ? "s" : ""}: each retry waits twice as long as the one before)` : "";
    const paused = this.paused ? ` The controller is <b>paused</b>: press <b>Step</b> to run one reconcile.` : "";
    if (q.state === "processing") return `<b>Right now: being reconciled</b> by a worker.`;
    if (q.state === "due") return `<b>Right now: queued, due now</b>: the next free worker reconciles it.${paused}`;
    return `<b>Right now: queued, waiting</b>: due ${esc(due)}${fails}.${paused}`;
  },

  // watchItem tells a watch event that no reconcile of this page's history wrote: a client's
  // change (yours, kubectl's), or a write the history does not show yet.
  watchItem(w) {
    let text;
    let why;
    if (w.type === "ADDED") {
      const s = w.obj.spec || {};
      text = `created: spec asks for ${s.replicas ?? "?"} × ${esc(s.image || "?")} (generation ${w.obj.metadata.generation}); no status yet`;
      why = "The store sends the new object to every watcher. The controller's informer is one: a new object matters, so it <b>queues its key</b> for a reconcile.";
    } else if (w.type === "DELETED") {
      text = "removed from the store";
      why = "Its last finalizer is gone, so the delete is complete; the controller forgets it.";
    } else {
      const what = w.old ? changes(w.old, w.obj) : [];
      text = esc(what.join("; ") || "metadata only");
      why = statusOnly(w)
        ? "A status-only change: the informer does <b>not</b> queue the key for it (otherwise a controller's own status writes would wake it for ever)."
        : `This change matters to the controller (${w.obj.metadata.deletionTimestamp && !(w.old || {metadata: {}}).metadata.deletionTimestamp ? "a delete waits for the finalizer's owner to clean up" : "spec, metadata, finalizers or deletion"}): the informer <b>queues the key</b>.`;
    }
    return `<li class="s-watch" data-type="${w.type}" data-rv="${w.rv}"><span class="tag">watch event</span> <span class="when">${w.at}</span>
      <b>${w.type}</b> ${rvTag(w.rv)}<div>${text}</div><div class="why">${why}</div></li>`;
  },

  passItem(p, n, why, last, later) {
    const ok = p.success;
    const read = this.versions.get(Number(p.resourceVersion));
    const lines = [];
    lines.push(`<div class="why">${why}</div>`);
    if (p.resourceVersion) lines.push(`<div><span class="k">read</span> the object at ${rvTag(p.resourceVersion)}, generation ${esc(p.generation)}${read ? ": " + esc(summary(read)) : ""}</div>`);
    lines.push(`<div><span class="k">${ok ? "did" : "failed"}</span> ${esc(explain(p))}</div>`);
    const wrote = (p.wrote || []).map((w) => {
      const v = this.versions.get(Number(w.resourceVersion));
      const prev = v && this.previousVersion(Number(w.resourceVersion));
      const ch = v && prev ? changes(prev, v).join("; ") : "";
      return `${esc(w.what)} ${rvTag(w.resourceVersion)}${ch ? `: ${esc(ch.replace(/^status: /, ""))}` : ""}`;
    });
    if (p.resourceVersion) lines.push(`<div><span class="k">wrote</span> ${wrote.length ? wrote.join("<br><span class=\"k\"></span> ") : "nothing"}</div>`);
    const echoes = (p.wrote || []).map((w) => this.watch.find((x) => x.rv === Number(w.resourceVersion))).filter(Boolean);
    if (echoes.length) {
      const again = echoes.filter((w) => !statusOnly(w));
      const tell = again.length
        ? `: ${again.map((w) => w.old ? changes(w.old, w.obj).filter((c) => !c.startsWith("status")).join(", ") : "a change").join("; ")} matters, so the informer <b>queues the key again</b> (it cannot tell who wrote a change)${again.length < echoes.length ? "; status-only changes do not" : ""}`
        : ": status-only changes, so they do <b>not</b> queue the key again";
      lines.push(`<div><span class="k">watch</span> the store sent ${echoes.length > 1 ? "these writes" : "this write"} back to every watcher, this controller's informer too${tell}.</div>`);
    }
    const after = this.versions.get(Number(((p.wrote || []).slice(-1)[0] || {}).resourceVersion));
    if (after) {
      const s = after.status || {};
      const ready = (s.conditions || []).find((c) => c.type === "Ready");
      const seen = s.observedGeneration === after.metadata.generation ? "it has acted on the latest spec" : "it has not acted on the latest spec yet";
      lines.push(`<div><span class="k">status</span> now says ${esc(s.phase || "–")}, ${esc(s.readyReplicas ?? 0)} of ${esc((after.spec || {}).replicas ?? "?")} replicas ready${ready ? `, Ready=${esc(ready.status)}` : ""}; observedGeneration ${esc(s.observedGeneration ?? "–")} of ${esc(after.metadata.generation)}: ${seen}</div>`);
    }
    lines.push(`<div><span class="k">next</span> ${this.next(p, n, last, later)}</div>`);
    // The calls of this reconcile (its API requests) go here once opemu records calls
    // (SPEC §21): callsOf(p) then returns them.
    const calls = callsOf(p);
    if (calls) lines.push(`<div class="calls"><span class="k">calls</span> ${calls}</div>`);
    const idle = ok && String(p.message).startsWith("nothing to do");
    return `<li class="s-pass ${ok ? "ok" : "fail"}${idle ? " idle" : ""}" data-pass="${n}"><span class="tag">reconcile #${n}</span> <span class="when">${esc(time(p.startTime))}</span>
      ${ok ? "✔ succeeded" : "✘ failed"} <span class="took">in ${esc(p.duration)}</span>${lines.join("")}</li>`;
  },

  // cause says why the pass at items[i] ran: a client's change since the pass before it, the
  // retry of that pass's failure, the watch event of its own write that matters (a finalizer),
  // the requeue it asked for, a request, or the resync.
  cause(items, i) {
    const p = items[i].p;
    if (p.resourceVersion && Number(p.resourceVersion) < this.since) return "Why: (it ran before this page followed the object)";
    let prev = null;
    let change = null;
    for (let j = i - 1; j >= 0; j--) {
      const it = items[j];
      if (it.kind === "pass") {
        prev = it.p;
        break;
      }
      if (!change && !statusOnly(it.w)) change = it.w;
    }
    if (change) return `Why: the ${change.type} watch event just before queued the key, and a worker took it.`;
    if (prev && !prev.success) return "Why: the retry of the failure just before, once its backoff had passed.";
    const echo = prev && (prev.wrote || []).map((w) => this.watch.find((x) => x.rv === Number(w.resourceVersion))).find((w) => w && !statusOnly(w));
    const gap = prev ? parseTime(p.startTime) - parseTime(prev.startTime) : 0;
    if (prev && prev.requeueAfter && (!echo || gap >= duration(prev.requeueAfter) - 5)) return `Why: the requeue the pass before asked for (${esc(prev.requeueAfter)} later).`;
    if (echo) return "Why: the watch event of the pass before's own metadata write queued the key again.";
    if (this.asked && Date.now() - this.asked < 5000) return "Why: you asked for it (Reconcile now).";
    return "Why: a request to reconcile, or the periodic resync (every object is queued again every RECONCILE_INTERVAL).";
  },

  // next says what the pass left planned: a retry, a requeue, or nothing; with the wait that
  // followed when a later pass shows it.
  next(p, n, last, later) {
    const waited = later ? ` (the next pass came ${((parseTime(later.startTime) - parseTime(p.startTime)) / 1000).toFixed(1)} s later)` : "";
    if (!p.success) {
      if (last && this.dropped) return "<b>given up</b>: too many failures in a row, so the controller dropped the key and set phase Failed; nothing happens until the spec or annotations change.";
      let k = 0;
      while (n - 1 - k >= 0 && !this.history[n - 1 - k].success) k++;
      return `<b>retry</b> after a backoff: ${k} failure${k > 1 ? "s" : ""} in a row so far, and each retry waits twice as long as the one before (1 s, 2 s, 4 s, … up to 16 s); after MAX_RETRIES retries the controller gives up${waited}.`;
    }
    if (p.requeueAfter) return `<b>requeue in ${esc(p.requeueAfter)}</b>: it asked to come back for the next rollout step (as a real controller returns RequeueAfter)${waited}.`;
    return "<b>done</b>: nothing more to do, so the key leaves the queue until the object changes again.";
  },

  // previousVersion is the version of the object just before rv, as the watch delivered it.
  previousVersion(rv) {
    let best = 0;
    for (const v of this.versions.keys()) if (v < rv && v > best) best = v;
    return best ? this.versions.get(best) : null;
  },
};

// callsOf returns the HTML listing the API calls a reconcile pass made, or null while opemu
// does not record calls. The record of calls (SPEC §21) fills this in.
function callsOf(p) {
  return null;
}

// statusOnly reports whether a watch event changed nothing but status: what the informer does
// not queue a key for (reconciler's matters()).
function statusOnly(w) {
  if (w.type !== "MODIFIED" || !w.old) return false;
  const c = changes(w.old, w.obj);
  return c.length > 0 && c.every((x) => x.startsWith("status"));
}

// rvTag shows a resourceVersion short (its last digits; all of it on hover): it names a version,
// and the same tag in a reconcile and in the timeline is the same write.
const rvTag = (rv) => `<span class="rv" title="resourceVersion ${esc(rv)}">rv …${esc(String(rv).slice(-5))}</span>`;

// duration reads a Go duration ("700ms", "1.5s", "2m0s") in milliseconds.
function duration(d) {
  let ms = 0;
  for (const [, n, u] of String(d).matchAll(/([\d.]+)(ns|us|µs|ms|s|m|h)/g)) {
    ms += Number(n) * { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1e3, m: 6e4, h: 36e5 }[u];
  }
  return ms;
}

// summary says what matters in one version of an object: what was asked and what was.
function summary(o) {
  const s = o.spec || {};
  const st = o.status || {};
  const fin = (o.metadata.finalizers || []).length ? "with its finalizer" : "no finalizer yet";
  const status = o.status ? `status ${st.phase || "–"}, ${st.readyReplicas ?? 0} ready, observedGeneration ${st.observedGeneration ?? "–"}` : "no status yet";
  const del = o.metadata.deletionTimestamp ? ", being deleted" : "";
  return `spec asks for ${s.replicas ?? "?"} × ${s.image || "?"}; ${status}; ${fin}${del}`;
}

// explain turns a pass's message into what the controller did, for someone new to operators.
function explain(p) {
  const m = String(p.message || "");
  let x;
  if ((x = m.match(/^observed generation (\d+)/))) return `saw a spec it had not acted on (generation ${x[1]}): set status.observedGeneration to ${x[1]}, Progressing=True, and started the rollout (adding its finalizer first if it was missing)`;
  if ((x = m.match(/^ready replicas (\d+) -> (\d+) of (\d+)/))) return `one rollout step: ready replicas ${x[1]} → ${x[2]} of ${x[3]}`;
  if ((x = m.match(/^(Running|Succeeded) with (\d+)\/(\d+)/))) return `every replica is ready: phase ${x[1]}, condition Ready=True`;
  if (m.startsWith("nothing to do yet")) return `woke up early: ${m.replace(/^nothing to do yet: /, "")}, so it wrote nothing`;
  if (m.startsWith("nothing to do")) return "compared spec and status and found nothing to do: the object is already as asked";
  if ((x = m.match(/^simulated failure (\d+) of (\S+)/))) return `failed on purpose, attempt ${x[1]} of ${x[2]} (the annotation cloudnative.elide.dev/simulate-failures asks for it); it wrote Ready=False`;
  if (m.startsWith("cleanup complete")) return "the object is being deleted: it cleaned up (ready replicas to 0) and removed its finalizer, so the store can delete it";
  return m;
}

const time = (s) => String(s || "").replace(/^.*T/, "").replace(/Z$/, "");

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
    const rows = ctrls.flatMap((x) => x.queue.map((q) => ({ ...q, controller: x.name })));
    $("queue").querySelector("tbody").innerHTML = rows
      .map((q) => `<tr data-object="${esc(q.object)}" data-state="${esc(q.state)}">
        <td>${esc(q.controller)}</td><td>${esc(q.object)}</td><td>${esc(q.state)}</td><td title="${esc(q.due)}">${q.due ? esc(ago(q.due, c.now)) : ""}</td><td>${esc(q.failures)}</td></tr>`)
      .join("");
    $("queue-empty").hidden = rows.length > 0;
    const o = selected && objects.get(selected);
    if (o) {
      const mine = ctrls.filter((x) => x.kind === o.kind && x.apiVersion === o.apiVersion);
      const item = mine.flatMap((x) => x.queue).find((q) => q.object === nameOf(o));
      story.queued(item ? { ...item, now: c.now } : null, mine.some((x) => (x.dropped || []).includes(nameOf(o))), state === "paused");
    }
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
$("step").onclick = () => {
  dismissHint();
  loopCall("/controller/step");
};
$("advance").onclick = () => loopCall("/clock/advance", { by: $("advance-by").value });

// The first-visit hint points at Step, the best way to watch the loop; it goes once dismissed
// (or once Step is pressed), for good in this browser.
const hintKey = "opemu.hint.step";
function dismissHint() {
  $("hint").hidden = true;
  $("step").classList.remove("pointed");
  try {
    localStorage.setItem(hintKey, "seen");
  } catch (err) {
    // storage off: the hint comes back next time
  }
}
function showHint() {
  let seen = null;
  try {
    seen = localStorage.getItem(hintKey);
  } catch (err) {
    seen = null;
  }
  $("hint").hidden = !!seen;
  $("step").classList.toggle("pointed", !seen);
}
$("hint-ok").onclick = dismissHint;

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

follow = "*";
showHint();
connect();
refreshController();
refreshLoop();
setInterval(refreshController, 2000);
setInterval(refreshDetail, 2000);
setInterval(refreshLoop, 1000);
