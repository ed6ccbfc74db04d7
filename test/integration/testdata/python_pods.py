"""Does with Debian's python3-kubernetes what the client's own e2e tests do with Pods, Jobs,
Deployments and Nodes: create, wait for them to run, list, delete.

Usage: python3 python_pods.py KUBECONFIG. Prints one JSON object per step on stdout; the Go
test (python_test.go, TestPythonPods) checks them. Every wait is bounded (30 s).
"""
import json
import sys
import time
import uuid

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream

NS = "default"


def out(step, **kw):
    print(json.dumps({"step": step, **kw}), flush=True)


def until(what, check, limit=30):
    """Polls check every 0.1 s until it returns something true, and returns it."""
    deadline = time.time() + limit
    while time.time() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise SystemExit("timed out waiting for " + what)


config.load_kube_config(sys.argv[1])
core = client.CoreV1Api()
batch = client.BatchV1Api()
apps = client.AppsV1Api()

# A Pod as a dict manifest, read until it leaves Pending (test_pod_apis).
name = "busybox-test-" + str(uuid.uuid4())[-12:]
created = core.create_namespaced_pod(namespace=NS, body={
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
    "spec": {"containers": [{"image": "busybox", "name": "sleep",
                             "args": ["/bin/sh", "-c", "while true;do date;sleep 5; done"]}]}})
pod = until("the Pod to run", lambda: (lambda p: p if p.status.phase != "Pending" else None)(
    core.read_namespaced_pod(name=name, namespace=NS)))
ready = [c.status for c in pod.status.conditions if c.type == "Ready"]
out("pod", name=pod.metadata.name, created_phase=created.status.phase, phase=pod.status.phase,
    ready=ready, node=pod.spec.node_name, ip=pod.status.pod_ip,
    started=pod.status.container_statuses[0].state.running is not None)

# exec is not served: the client gets an error, at once.
try:
    stream(core.connect_get_namespaced_pod_exec, name, NS, command=["date"],
           stderr=False, stdin=False, stdout=True, tty=False)
    out("exec", error=None)
except Exception as e:  # the websocket client's or ApiException
    out("exec", error=type(e).__name__, status=getattr(e, "status", None))

out("all-pods", count=len(core.list_pod_for_all_namespaces().items))
core.delete_namespaced_pod(name=name, namespace=NS, body={})


def gone():
    try:
        core.read_namespaced_pod(name=name, namespace=NS)
        return False
    except ApiException as e:
        return e.status == 404


until("the Pod to go", gone)
out("pod-deleted", name=name)

# A Job (test_job_apis), and its Pod running.
job = "test-job-" + str(uuid.uuid4())[-12:]
batch.create_namespaced_job(namespace=NS, body={
    "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job},
    "spec": {"template": {"metadata": {"name": job}, "spec": {
        "restartPolicy": "Never",
        "containers": [{"image": "busybox", "name": job, "command": ["sh", "-c", "sleep 5"]}]}}}})
running = until("the Job's Pod to run", lambda: [p.metadata.name for p in core.list_namespaced_pod(
    NS, label_selector="job-name=" + job).items if p.status.phase == "Running"])
out("job", name=batch.read_namespaced_job(name=job, namespace=NS).metadata.name, running=len(running))
batch.delete_namespaced_job(name=job, namespace=NS, body={}, propagation_policy="Background")

# A Deployment of typed models, waited for until its replicas are ready.
labels = {"app": "py-web"}
apps.create_namespaced_deployment(namespace=NS, body=client.V1Deployment(
    metadata=client.V1ObjectMeta(name="py-web"),
    spec=client.V1DeploymentSpec(
        replicas=2, selector=client.V1LabelSelector(match_labels=labels),
        template=client.V1PodTemplateSpec(
            metadata=client.V1ObjectMeta(labels=labels),
            spec=client.V1PodSpec(containers=[client.V1Container(name="nginx", image="nginx:1.27")])))))
d = until("the Deployment to be ready", lambda: (lambda d: d if d.status.ready_replicas == 2 else None)(
    apps.read_namespaced_deployment(name="py-web", namespace=NS)))
pods = core.list_namespaced_pod(NS, label_selector="app=py-web").items
out("deployment", ready=d.status.ready_replicas, available=d.status.available_replicas,
    phases=sorted(p.status.phase for p in pods))

# Nodes (test_node_apis).
nodes = [core.read_node(name=n.metadata.name) for n in core.list_node().items]
out("nodes", names=[n.metadata.name for n in nodes], labelled=all(len(n.metadata.labels) > 0 for n in nodes),
    ready=[c.status for n in nodes for c in n.status.conditions if c.type == "Ready"])
