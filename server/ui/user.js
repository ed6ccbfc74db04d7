// opemu dashboard: the user the page acts as. With a user chosen (a ServiceAccount, or a user a
// binding names), every request the page makes to the Kubernetes API (/api, /apis) carries
// Impersonate-User, as `kubectl --as` does: its writes are allowed or refused (403) as that
// user's Roles say, and the line under the header lists what the user may do in the form's
// namespace (a SelfSubjectRulesReview, `kubectl auth can-i --list --as`). The live view (the
// /watch stream) and opemu's own endpoints stay the dashboard's own user's. Loaded before
// app.js, whose fetch calls it wraps.
"use strict";

(() => {
  const plainFetch = window.fetch.bind(window);
  const key = "opemu.user";
  let user = sessionStorage.getItem(key) || "";

  // The Kubernetes API's paths: only they are impersonated.
  const isAPI = (input) => {
    const url = new URL(typeof input === "string" ? input : input.url, location.href);
    return url.origin === location.origin && (url.pathname.startsWith("/api/") || url.pathname.startsWith("/apis/"));
  };
  window.fetch = (input, init = {}) => {
    if (!user || !isAPI(input)) return plainFetch(input, init);
    const headers = new Headers(init.headers || {});
    headers.set("Impersonate-User", user);
    return plainFetch(input, { ...init, headers });
  };

  const status = document.querySelector("header .status");
  const span = document.createElement("span");
  span.title = "whom this page's API requests act as (Impersonate-User, as kubectl --as)";
  span.append("user: ");
  const select = document.createElement("select");
  select.id = "user";
  span.append(select);
  status.append(span);
  const rules = document.createElement("p");
  rules.id = "user-rules";
  rules.className = "hint-inline";
  rules.hidden = true;
  document.querySelector("header").after(rules);

  const option = (value, text) => {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = text;
    return o;
  };

  // candidates lists the ServiceAccounts and the users the bindings name, as the dashboard's
  // own user reads them: yours, not the cluster's own (kube-system's, system:*).
  async function candidates() {
    const names = new Set();
    const list = async (path) => {
      const r = await plainFetch(path);
      return r.ok ? (await r.json()).items || [] : [];
    };
    for (const sa of await list("/api/v1/serviceaccounts")) {
      names.add(`system:serviceaccount:${sa.metadata.namespace}:${sa.metadata.name}`);
    }
    for (const path of ["/apis/rbac.authorization.k8s.io/v1/rolebindings", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"]) {
      for (const b of await list(path)) {
        for (const s of b.subjects || []) {
          if (s.kind === "User") names.add(s.name);
          if (s.kind === "ServiceAccount") names.add(`system:serviceaccount:${s.namespace || b.metadata.namespace}:${s.name}`);
        }
      }
    }
    for (const n of names) {
      if (n.startsWith("system:serviceaccount:kube-system:") || (n.startsWith("system:") && !n.startsWith("system:serviceaccount:"))) names.delete(n);
    }
    if (user) names.add(user);
    select.replaceChildren(option("", "the dashboard's own"), ...[...names].sort().map((n) => option(n, n)));
    select.value = user;
  }

  // showRules tells what the chosen user may do in the form's namespace.
  async function showRules() {
    rules.hidden = !user;
    if (!user) return;
    const ns = (document.getElementById("new-namespace") || {}).value || "default";
    const r = await fetch("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectRulesReview", spec: { namespace: ns } }),
    });
    const data = await r.json().catch(() => ({}));
    if (!r.ok) {
      rules.textContent = `As ${user}: ${r.status} ${data.message || ""}`;
      return;
    }
    const may = ((data.status || {}).resourceRules || [])
      .filter((x) => !(x.apiGroups || []).some((g) => g.endsWith("authorization.k8s.io") || g.endsWith("authentication.k8s.io")))
      .map((x) => `${(x.verbs || []).join(",")} ${(x.resources || []).join(",")}${(x.resourceNames || []).length ? " " + x.resourceNames.join(",") : ""}`);
    rules.textContent = `As ${user} in ${ns}: ` + (may.length ? `may ${may.join("; ")}` : "may do nothing here") +
      ". This page's writes now go as this user; the live view stays the dashboard's own.";
    rules.dataset.user = user;
  }

  select.addEventListener("focus", () => candidates().catch(() => {}));
  select.addEventListener("change", () => {
    user = select.value;
    if (user) sessionStorage.setItem(key, user);
    else sessionStorage.removeItem(key);
    showRules().catch(() => {});
  });
  document.addEventListener("change", (e) => {
    if (e.target && e.target.id === "new-namespace") showRules().catch(() => {});
  });
  window.addEventListener("DOMContentLoaded", () => {
    candidates().then(showRules).catch(() => {});
  });
})();
