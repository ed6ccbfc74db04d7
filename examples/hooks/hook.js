// A reconcile hook for DatabaseClusters, in Node with no dependencies: the same as hook.py.
//
// opemu POSTs {controller, object, children, attempt, finalizing} for every DatabaseCluster that
// changes; we answer what the world should look like: {status, children, events,
// requeueAfterSeconds, finalized}. opemu does the rest (queue, retries, owner references, writes).
// Run: PORT=8082 node examples/hooks/hook.js
"use strict";
const http = require("node:http");

const PORTS = { postgres: 5432, mysql: 3306, mariadb: 3306 };

function reconcile(req) {
  const db = req.object;
  const { metadata: meta, spec } = db;
  const status = db.status ?? {};
  const name = meta.name;

  if (req.finalizing) { // being deleted: opemu waits until we say finalized
    if (status.phase !== "Deleting") {
      return { status: { ...status, phase: "Deleting" }, requeueAfterSeconds: 1,
        events: [{ reason: "Deleting", message: `taking a last backup of ${name}` }] };
    }
    return { finalized: true, events: [{ reason: "Deleted", message: "backup done, goodbye" }] };
  }

  const endpoint = `${name}.${meta.namespace}.svc:${PORTS[spec.engine]}`;
  const config = {
    apiVersion: "v1", kind: "ConfigMap",
    metadata: { name: `${name}-config`, labels: { "db.example.com/cluster": name } },
    data: { engine: spec.engine, version: spec.engineVersion, storageGB: String(spec.storageGB),
      replicas: String(spec.replicas ?? 0), endpoint },
  };
  // The first pass creates the ConfigMap; once it exists (opemu sends it back to us in
  // children) the cluster is Ready.
  const exists = config.metadata.name in req.children["ConfigMap.v1"];
  const phase = exists ? "Ready" : "Provisioning";
  const events = [];
  if (phase !== status.phase) {
    events.push({ reason: phase, message: `${spec.engine} ${spec.engineVersion} is ${phase.toLowerCase()}` });
  }
  return {
    status: { phase, observedGeneration: meta.generation, endpoint },
    children: [config],
    events,
    requeueAfterSeconds: exists ? 0 : 1,
  };
}

const server = http.createServer((q, s) => {
  let body = "";
  q.on("data", (chunk) => (body += chunk));
  q.on("end", () => {
    const req = JSON.parse(body);
    const answer = reconcile(req);
    s.writeHead(200, { "Content-Type": "application/json" });
    s.end(JSON.stringify(answer));
    console.log(`${req.object.metadata.name} attempt=${req.attempt} finalizing=${req.finalizing} -> ${answer.status?.phase ?? "finalized"}`);
  });
});
server.listen(Number(process.env.PORT ?? 8082), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/`);
});
