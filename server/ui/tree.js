// opemu dashboard: the workloads tree. Controllers built on controllers, live: each Deployment,
// the ReplicaSets it controls (newest revision first), the Pods each ReplicaSet controls, and
// the Node each Pod is bound to, as the watch stream app.js opens delivers them (app.js sends
// every change as an "opemu:watch" event on document, and "opemu:relist" when it lists again).
// Ownership is by the controller ownerReference's uid, as kube's controllers and garbage
// collector follow it. A rollout shows Pod by Pod: the new ReplicaSet's Pods appear, bound,
// then Running and Ready, while the old one's go. Owns #tree; loaded before app.js.
"use strict";

(() => {
  const perReplicaSet = 12; // Pods listed under one ReplicaSet; the rest are counted
  const list = document.getElementById("tree-list");
  const empty = document.getElementById("tree-empty");
  const kinds = new Map([["Deployment", "apps/v1"], ["ReplicaSet", "apps/v1"], ["Pod", "v1"]]); // kind → its apiVersion
  const byUID = { Deployment: new Map(), ReplicaSet: new Map(), Pod: new Map() };
  let timer = null;

  const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const controllerUID = (o) => ((o.metadata.ownerReferences || []).find((r) => r.controller) || {}).uid || "";
  const revision = (o) => Number(((o.metadata.annotations || {})["deployment.kubernetes.io/revision"]) || 0);
  const images = (spec) => (((spec || {}).template || {}).spec || {}).containers || [];
  const image = (o) => images(o.spec).map((c) => c.image).join(", ");
  const ready = (p) => ((p.status || {}).conditions || []).some((c) => c.type === "Ready" && c.status === "True");

  // podState is what a Pod's line says: where it is in its life, from its status.
  function podState(p) {
    const phase = (p.status || {}).phase || "Pending";
    if (p.metadata.deletionTimestamp) return "Terminating";
    if (phase === "Pending" && !p.spec.nodeName) return "Pending";
    if (phase === "Running" && !ready(p)) return "Running";
    return phase;
  }

  function pod(p) {
    const st = podState(p);
    const node = p.spec.nodeName || "";
    const where = node ? `<span class="node" title="spec.nodeName: bound by the scheduler">→ Node ${esc(node)}</span>` :
      `<span class="node none" title="no Node yet: the scheduler has not bound it">unscheduled</span>`;
    return `<li data-kind="Pod" data-name="${esc(p.metadata.name)}" data-node="${esc(node)}" data-phase="${esc(st)}" data-ready="${ready(p)}">` +
      `<span class="k">Pod</span> ${esc(p.metadata.name)} <span class="st st-${esc(st)}">${esc(st)}${ready(p) ? " · Ready" : ""}</span> ${where}</li>`;
  }

  function replicaSet(rs, pods) {
    const s = rs.spec || {};
    const st = rs.status || {};
    pods.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const shown = pods.slice(0, perReplicaSet).map(pod).join("");
    const rest = pods.slice(perReplicaSet);
    const more = rest.length ? `<li class="more">… and ${rest.length} more Pods (${rest.filter(ready).length} Ready)</li>` : "";
    const nodes = new Set(pods.map((p) => p.spec.nodeName).filter(Boolean));
    return `<li data-kind="ReplicaSet" data-name="${esc(rs.metadata.name)}" data-revision="${revision(rs)}" data-pods="${pods.length}" data-ready="${pods.filter(ready).length}">` +
      `<span class="k">ReplicaSet</span> ${esc(rs.metadata.name)} <span class="meta">revision ${revision(rs)} · ${esc(st.readyReplicas ?? 0)}/${esc(s.replicas ?? 0)} ready · ${esc(image(rs))}` +
      `${nodes.size ? ` · on ${nodes.size} Node${nodes.size > 1 ? "s" : ""}` : ""}</span>` +
      (shown || more ? `<ul>${shown}${more}</ul>` : "") + "</li>";
  }

  function deployment(d, sets, podsOf) {
    const s = d.spec || {};
    const st = d.status || {};
    sets.sort((a, b) => revision(b) - revision(a) || a.metadata.name.localeCompare(b.metadata.name));
    const name = `${d.metadata.namespace}/${d.metadata.name}`;
    const progressing = ((st.conditions || []).find((c) => c.type === "Progressing") || {}).reason || "";
    return `<li data-kind="Deployment" data-name="${esc(d.metadata.name)}" data-namespace="${esc(d.metadata.namespace)}" data-replicasets="${sets.length}">` +
      `<span class="k">Deployment</span> <b>${esc(name)}</b> <span class="meta">${esc(st.readyReplicas ?? 0)}/${esc(s.replicas ?? 1)} ready · ${esc(st.updatedReplicas ?? 0)} updated` +
      `${progressing ? " · " + esc(progressing) : ""} · ${esc(image(d))}</span>` +
      `<ul>${sets.map((rs) => replicaSet(rs, podsOf.get(rs.metadata.uid) || [])).join("")}</ul></li>`;
  }

  function render() {
    timer = null;
    const podsOf = new Map(); // ReplicaSet uid → its Pods
    for (const p of byUID.Pod.values()) {
      const owner = controllerUID(p);
      if (!podsOf.has(owner)) podsOf.set(owner, []);
      podsOf.get(owner).push(p);
    }
    const setsOf = new Map(); // Deployment uid → its ReplicaSets
    for (const rs of byUID.ReplicaSet.values()) {
      const owner = controllerUID(rs);
      if (!setsOf.has(owner)) setsOf.set(owner, []);
      setsOf.get(owner).push(rs);
    }
    const deps = [...byUID.Deployment.values()].sort((a, b) =>
      `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`));
    list.innerHTML = deps.map((d) => deployment(d, setsOf.get(d.metadata.uid) || [], podsOf)).join("");
    empty.hidden = deps.length > 0;
  }

  // renderSoon draws at most ten times a second, however fast Pods change.
  function renderSoon() {
    if (!timer) timer = setTimeout(render, 100);
  }

  document.addEventListener("opemu:watch", (e) => {
    const { type, object: o } = e.detail;
    if (!o || !o.metadata || kinds.get(o.kind) !== o.apiVersion) return;
    if (type === "DELETED") byUID[o.kind].delete(o.metadata.uid);
    else byUID[o.kind].set(o.metadata.uid, o);
    renderSoon();
  });
  document.addEventListener("opemu:relist", () => {
    for (const m of Object.values(byUID)) m.clear();
    renderSoon();
  });
})();
