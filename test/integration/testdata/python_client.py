"""Drives opemu with Debian's python3-kubernetes the way its users write code.

Usage: python3 python_client.py KUBECONFIG. Prints one JSON object per step on stdout; the Go
test (python_test.go) checks them. Every watch is bounded by timeout_seconds.
"""
import json
import sys

from kubernetes import client, config, watch

GROUP, VERSION, PLURAL, NS = "cloudnative.elide.dev", "v1", "applications", "default"


def out(step, **kw):
    print(json.dumps({"step": step, **kw}), flush=True)


config.load_kube_config(sys.argv[1])
apps = client.CustomObjectsApi()
core = client.CoreV1Api()

apps.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, {
    "apiVersion": f"{GROUP}/{VERSION}", "kind": "Application",
    "metadata": {"name": "py-app"}, "spec": {"replicas": 1, "image": "nginx:1.27"}})

# Watch: the current object arrives as ADDED; a patch made while watching as MODIFIED.
seen, resume_from = [], None
w = watch.Watch()
for ev in w.stream(apps.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL, timeout_seconds=10):
    obj = ev["object"]
    seen.append([ev["type"], obj["metadata"]["name"], obj["spec"]["replicas"]])
    if ev["type"] == "ADDED":
        apps.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "py-app", {"spec": {"replicas": 2}})
    elif ev["type"] == "MODIFIED":
        resume_from = obj["metadata"]["resourceVersion"]
        w.stop()
out("watch", events=seen, resourceVersion=resume_from)

# Resume: a change made while nobody watched is the first thing a watch from that version sees.
apps.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "py-app", {"spec": {"replicas": 3}})
seen = []
w = watch.Watch()
for ev in w.stream(apps.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                   resource_version=resume_from, timeout_seconds=10):
    seen.append([ev["type"], ev["object"]["metadata"]["name"], ev["object"]["spec"]["replicas"]])
    w.stop()
out("resume", events=seen)

# Built-in kinds as typed models, without apiVersion and kind, named by generateName.
ns = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(generate_name="py-")))
out("namespace", name=ns.metadata.name, phase=ns.status.phase)
seen = []
w = watch.Watch()
for ev in w.stream(core.list_namespace, field_selector="metadata.name=" + ns.metadata.name, timeout_seconds=10):
    seen.append([ev["type"], ev["object"].metadata.name])
    w.stop()
out("namespace-watch", events=seen)
