// opemu dashboard: the calls panel. Every API call opemu answered and every write its own
// controllers made (package calls): the newest first, as GET /calls has them and then as
// /calls/stream brings them, filtered by client (a user agent's prefix or a user), writes only,
// opemu's own or not, and by reconcile (a reconcile column's value filters by it: that
// reconcile's calls, beside the history the panels above show). Owns #calls; loaded before app.js.
"use strict";

(() => {
  const shown = 200; // rows kept on the page
  const body = document.querySelector("#call-list tbody");
  const client = document.getElementById("call-client");
  const writes = document.getElementById("call-writes");
  const internal = document.getElementById("call-internal");
  const reconcile = document.getElementById("call-reconcile");
  const note = document.getElementById("call-note");
  let source = null;
  let generation = 0; // a newer filter abandons the answers of an older one

  // query is the filter as /calls and /calls/stream take it.
  function query() {
    const q = new URLSearchParams();
    const who = client.value.trim();
    if (who) q.set(who.includes(":") ? "user" : "agent", who);
    if (writes.checked) q.set("writes", "true");
    if (!internal.checked) q.set("internal", "false");
    if (reconcile.value.trim()) q.set("reconcile", reconcile.value.trim());
    return q;
  }

  const cell = (text, title) => {
    const td = document.createElement("td");
    td.textContent = text;
    if (title) td.title = title;
    return td;
  };

  // row is one call, its data-* attributes naming what tests and styles select on.
  function row(c) {
    const tr = document.createElement("tr");
    const who = c.internal ? c.component || "opemu" : (c.userAgent || "").split("/")[0] || c.user || "";
    Object.assign(tr.dataset, { id: c.id, verb: c.verb, resource: c.resource || "", client: who, code: c.code, reconcile: c.reconcile || "" });
    if (c.internal) tr.classList.add("internal");
    if (c.code >= 400) tr.classList.add("failed");
    const at = new Date(c.start);
    const what = (c.resource || c.requestURI || "") + (c.subresource ? "/" + c.subresource : "");
    const where = [c.namespace, c.name].filter(Boolean).join("/");
    tr.append(
      cell(at.toLocaleTimeString([], { hour12: false }) + "." + String(at.getMilliseconds()).padStart(3, "0"), c.start),
      cell(who, [c.user, c.userAgent, c.fieldManager && "fieldManager " + c.fieldManager].filter(Boolean).join("\n")),
      cell(c.verb), cell(what), cell(where),
      cell(String(c.code) + (c.reason ? " " + c.reason : "")),
      cell((c.latencySeconds * 1000).toFixed(1) + " ms" + (c.watchEvents ? `, ${c.watchEvents} events` : "")),
    );
    const rc = cell(c.reconcile || "");
    if (c.reconcile) {
      rc.className = "link";
      rc.title = "only this reconcile's calls";
      rc.addEventListener("click", () => { reconcile.value = c.reconcile; follow(); });
    }
    tr.append(rc);
    return tr;
  }

  function add(c) {
    body.prepend(row(c));
    while (body.rows.length > shown) body.deleteRow(body.rows.length - 1);
  }

  // follow lists the calls the filter matches, then streams the ones after them.
  async function follow() {
    const mine = ++generation;
    if (source) source.close();
    source = null;
    const q = query();
    q.set("limit", "50");
    const r = await fetch("/calls?" + q);
    if (mine !== generation) return;
    if (!r.ok) {
      note.textContent = `GET /calls: ${r.status}`;
      return;
    }
    const list = await r.json();
    if (mine !== generation) return;
    body.replaceChildren();
    for (const c of list.items || []) add(c);
    note.textContent = `the last ${list.size} calls are kept (CALL_HISTORY)`;
    q.delete("limit");
    q.set("after", String(list.last));
    source = new EventSource("/calls/stream?" + q);
    source.onmessage = (e) => add(JSON.parse(e.data));
    source.addEventListener("missed", (e) => { note.textContent = `${e.data} calls missed: the page fell behind`; });
  }

  for (const el of [client, reconcile]) el.addEventListener("change", follow);
  for (const el of [writes, internal]) el.addEventListener("change", follow);
  document.getElementById("call-clear").addEventListener("click", () => {
    client.value = reconcile.value = "";
    follow();
  });
  follow();
})();
