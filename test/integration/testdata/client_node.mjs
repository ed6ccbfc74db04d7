// Drives opemu with the JavaScript client (@kubernetes/client-node) the way its users write
// code, with the kubeconfig `opemu kubeconfig` wrote, unedited.
//
// Usage: CLIENT_NODE=<path of the package's dist/index.js> node client_node.mjs KUBECONFIG
// Prints one JSON object per step on stdout; the Go test (clientnode_test.go) checks them.
import { pathToFileURL } from "node:url";

const k8s = await import(pathToFileURL(process.env.CLIENT_NODE).href);
const out = (step, fields) => console.log(JSON.stringify({ step, ...fields }));
const [group, version, namespace, plural] = ["cloudnative.elide.dev", "v1", "default", "applications"];

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const apps = kc.makeApiClient(k8s.CustomObjectsApi);
const core = kc.makeApiClient(k8s.CoreV1Api);

await apps.createNamespacedCustomObject({
  group, version, namespace, plural,
  body: { apiVersion: `${group}/${version}`, kind: "Application", metadata: { name: "js-app" }, spec: { replicas: 1, image: "nginx:1.27" } },
});
const list = await apps.listNamespacedCustomObject({ group, version, namespace, plural });
out("list", { kind: list.kind, names: list.items.map((i) => i.metadata.name) });
// A typed model without apiVersion and kind, named by generateName.
const created = await core.createNamespace({ body: { metadata: { generateName: "js-" } } });
out("created", { name: created.metadata.name, kind: created.kind });
const namespaces = await core.listNamespace();
out("namespaces", { names: namespaces.items.map((i) => i.metadata.name) });

// Watch: the current object arrives as ADDED; a patch made while watching as MODIFIED.
const seen = [];
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`watch saw only ${JSON.stringify(seen)} in 10s`)), 10000);
  let abort;
  new k8s.Watch(kc)
    .watch(`/apis/${group}/${version}/namespaces/${namespace}/${plural}`, {},
      (type, obj) => {
        seen.push([type, obj.metadata.name, obj.spec.replicas]);
        if (type === "ADDED") {
          apps.patchNamespacedCustomObject({ group, version, namespace, plural, name: "js-app", body: { spec: { replicas: 2 } } },
            k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch)).catch(reject);
        } else if (type === "MODIFIED") {
          clearTimeout(timer);
          abort.abort();
          resolve();
        }
      },
      (err) => { if (err && err.name !== "AbortError") reject(err); })
    .then((controller) => { abort = controller; }, reject);
});
out("watch", { events: seen });
