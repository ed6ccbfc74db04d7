#!/usr/bin/env python3
"""A reconcile hook for DatabaseClusters, in Python with the standard library only.

opemu POSTs {controller, object, children, attempt, finalizing} for every DatabaseCluster that
changes; we answer what the world should look like: {status, children, events,
requeueAfterSeconds, finalized}. opemu does the rest (queue, retries, owner references, writes).
Run: PORT=8081 python3 examples/hooks/hook.py
"""
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTS = {"postgres": 5432, "mysql": 3306, "mariadb": 3306}


def reconcile(req):
    db = req["object"]
    meta, spec, status = db["metadata"], db["spec"], db.get("status", {})
    name = meta["name"]

    if req["finalizing"]:  # being deleted: opemu waits until we say finalized
        if status.get("phase") != "Deleting":
            return {"status": {**status, "phase": "Deleting"}, "requeueAfterSeconds": 1,
                    "events": [{"reason": "Deleting", "message": f"taking a last backup of {name}"}]}
        return {"finalized": True, "events": [{"reason": "Deleted", "message": "backup done, goodbye"}]}

    endpoint = f"{name}.{meta['namespace']}.svc:{PORTS[spec['engine']]}"
    config = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config", "labels": {"db.example.com/cluster": name}},
        "data": {"engine": spec["engine"], "version": spec["engineVersion"],
                 "storageGB": str(spec["storageGB"]), "replicas": str(spec.get("replicas", 0)),
                 "endpoint": endpoint},
    }
    # The first pass creates the ConfigMap; once it exists (opemu sends it back to us in
    # children) the cluster is Ready.
    exists = config["metadata"]["name"] in req["children"]["ConfigMap.v1"]
    phase = "Ready" if exists else "Provisioning"
    events = []
    if phase != status.get("phase"):
        events.append({"reason": phase, "message": f"{spec['engine']} {spec['engineVersion']} is {phase.lower()}"})
    return {
        "status": {"phase": phase, "observedGeneration": meta["generation"], "endpoint": endpoint},
        "children": [config],
        "events": events,
        "requeueAfterSeconds": 0 if exists else 1,
    }


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = reconcile(req)
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        print(f"{req['object']['metadata']['name']} attempt={req['attempt']} finalizing={req['finalizing']}"
              f" -> {answer.get('status', {}).get('phase', 'finalized')}", flush=True)

    def log_message(self, *args):  # one line per call is printed above
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8081"))), Hook)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/", flush=True)
    server.serve_forever()
