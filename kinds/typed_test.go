package kinds_test

import (
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := cache.DecodeJSON([]byte(s))
	require.NoError(t, err)
	return m
}

func lookup(t *testing.T, r *kinds.Registry, group, version, plural string) *kinds.Kind {
	t.Helper()
	k, ok := r.Lookup(group, version, plural)
	require.True(t, ok, "%s/%s %s is served", group, version, plural)
	return k
}

func TestServedKinds(t *testing.T) {
	t.Parallel()
	r := kinds.New()
	tests := []struct {
		group, version, plural, kind string
		namespaced, status, scale    bool
		short                        []string
	}{
		{"", "v1", "configmaps", "ConfigMap", true, false, false, []string{"cm"}},
		{"", "v1", "secrets", "Secret", true, false, false, nil},
		{"", "v1", "serviceaccounts", "ServiceAccount", true, false, false, []string{"sa"}},
		{"", "v1", "services", "Service", true, true, false, []string{"svc"}},
		{"", "v1", "pods", "Pod", true, true, false, []string{"po"}},
		{"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, true, false, []string{"pvc"}},
		{"", "v1", "endpoints", "Endpoints", true, false, false, []string{"ep"}},
		{"apps", "v1", "deployments", "Deployment", true, true, true, []string{"deploy"}},
		{"apps", "v1", "replicasets", "ReplicaSet", true, true, true, []string{"rs"}},
		{"apps", "v1", "statefulsets", "StatefulSet", true, true, true, []string{"sts"}},
		{"apps", "v1", "daemonsets", "DaemonSet", true, true, false, []string{"ds"}},
		{"batch", "v1", "jobs", "Job", true, true, false, nil},
		{"batch", "v1", "cronjobs", "CronJob", true, true, false, []string{"cj"}},
		{"rbac.authorization.k8s.io", "v1", "roles", "Role", true, false, false, nil},
		{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, false, false, nil},
		{"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, false, false, nil},
		{"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, false, false, nil},
		{"networking.k8s.io", "v1", "ingresses", "Ingress", true, true, false, []string{"ing"}},
		{"networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true, false, false, []string{"netpol"}},
		{"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, true, false, []string{"pdb"}},
		{"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", false, false, false, nil},
		{"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false, false, false, nil},
		{"events.k8s.io", "v1", "events", "Event", true, false, false, []string{"ev"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+"."+tt.group, func(t *testing.T) {
			k := lookup(t, r, tt.group, tt.version, tt.plural)
			assert.Equal(t, tt.kind, k.Kind)
			assert.Equal(t, tt.kind+"List", k.ListKind)
			assert.Equal(t, tt.namespaced, k.Namespaced)
			assert.Equal(t, tt.status, k.Status)
			assert.Equal(t, tt.scale, k.Scale != nil)
			assert.Equal(t, tt.short, k.ShortNames)
			assert.True(t, k.Protobuf)
			assert.NotNil(t, k.StrategicPatch)
			assert.NotNil(t, k.Schema)
			assert.NotNil(t, k.TypeConverter)
		})
	}
	// events.k8s.io/v1 Event is a view: stored as, and resolved to, the v1 Events.
	view := lookup(t, r, "events.k8s.io", "v1", "events")
	assert.Equal(t, kinds.Events, view.GroupResource())
	stored, ok := r.Resource(kinds.Events)
	require.True(t, ok)
	assert.Equal(t, "v1", stored.GroupVersion(), "the v1 kind stays the storage of events")
	assert.Equal(t, []cache.GroupResource{kinds.Events}, r.Resolve("events"))
}

func TestTypedSchemaPruneDefaultValidate(t *testing.T) {
	t.Parallel()
	r := kinds.New()
	deploy := lookup(t, r, "apps", "v1", "deployments")
	obj := decode(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","foo":1},
		"spec":{"bogus":true,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
		"spec":{"containers":[{"name":"web","image":"nginx:1.27","extra":"x","ports":[{"containerPort":80}]}]}}}}`)
	assert.Equal(t, []string{"metadata.foo", "spec.bogus", "spec.template.spec.containers[0].extra"}, deploy.Schema.Prune(obj))
	deploy.Schema.Default(obj)
	u := unstructured.Unstructured{Object: obj}
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"spec", "replicas"}, json.Number("1")},
		{[]string{"spec", "strategy", "type"}, "RollingUpdate"},
		{[]string{"spec", "strategy", "rollingUpdate", "maxUnavailable"}, "25%"},
		{[]string{"spec", "revisionHistoryLimit"}, json.Number("10")},
		{[]string{"spec", "progressDeadlineSeconds"}, json.Number("600")},
		{[]string{"spec", "template", "spec", "restartPolicy"}, "Always"},
		{[]string{"spec", "template", "spec", "dnsPolicy"}, "ClusterFirst"},
		{[]string{"spec", "template", "spec", "schedulerName"}, "default-scheduler"},
		{[]string{"spec", "template", "spec", "terminationGracePeriodSeconds"}, json.Number("30")},
	} {
		got, ok, err := unstructured.NestedFieldNoCopy(u.Object, c.path...)
		require.NoError(t, err)
		require.True(t, ok, "%v is defaulted", c.path)
		assert.Equal(t, c.want, got, "%v", c.path)
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	assert.Equal(t, "IfNotPresent", c["imagePullPolicy"])
	assert.Equal(t, "/dev/termination-log", c["terminationMessagePath"])
	assert.Equal(t, "TCP", c["ports"].([]any)[0].(map[string]any)["protocol"])
	assert.Empty(t, deploy.Schema.Validate(obj))

	// Defaulting is idempotent: a defaulted object is stored as it is.
	again, err := json.Marshal(obj)
	require.NoError(t, err)
	deploy.Schema.Default(obj)
	after, err := json.Marshal(obj)
	require.NoError(t, err)
	assert.JSONEq(t, string(again), string(after))

	invalid := []struct {
		name string
		obj  string
		want []string // field: type
	}{
		{"types", `{"spec":{"replicas":"3"}}`, []string{"spec.replicas: " + string(field.ErrorTypeTypeInvalid)}},
		{"required selector", `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"b"}]}}}}`, []string{"spec.selector: " + string(field.ErrorTypeRequired)}},
		{"selector does not select the template", `{"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"c"}},"spec":{"containers":[{"name":"a","image":"b"}]}}}}`,
			[]string{"spec.template.metadata.labels: " + string(field.ErrorTypeInvalid)}},
		{"containers", `{"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"A_1"},{"name":"A_1","image":"x"}]}}}}`,
			[]string{"spec.template.spec.containers[0].name: " + string(field.ErrorTypeInvalid), "spec.template.spec.containers[0].image: " + string(field.ErrorTypeRequired),
				"spec.template.spec.containers[1].name: " + string(field.ErrorTypeInvalid), "spec.template.spec.containers[1].name: " + string(field.ErrorTypeDuplicate)}},
		{"quantity", `{"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"a","image":"b","resources":{"limits":{"cpu":"lots"}}}]}}}}`,
			[]string{"spec.template.spec.containers[0].resources.limits[cpu]: " + string(field.ErrorTypeInvalid)}},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			obj := decode(t, tt.obj)
			obj["apiVersion"], obj["kind"] = "apps/v1", "Deployment"
			deploy.Schema.Default(obj)
			var got []string
			for _, e := range deploy.Schema.Validate(obj) {
				got = append(got, e.Field+": "+string(e.Type))
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestServiceAllocationsAreKept(t *testing.T) {
	t.Parallel()
	svc := lookup(t, kinds.New(), "", "v1", "services")
	obj := decode(t, `{"apiVersion":"v1","kind":"Service","spec":{"type":"NodePort","ports":[{"name":"http","port":80}]}}`)
	svc.PrepareForCreate(obj)
	spec := obj["spec"].(map[string]any)
	ip := spec["clusterIP"]
	assert.Regexp(t, `^10\.(9[6-9]|10[0-9]|11[01])\.\d+\.\d+$`, ip)
	nodePort := spec["ports"].([]any)[0].(map[string]any)["nodePort"]
	assert.NotNil(t, nodePort)

	// An update that rebuilds the spec keeps what was allocated.
	next := decode(t, `{"apiVersion":"v1","kind":"Service","spec":{"type":"NodePort","ports":[{"name":"http","port":80}]}}`)
	svc.PrepareForUpdate(next, obj)
	nextSpec := next["spec"].(map[string]any)
	assert.Equal(t, ip, nextSpec["clusterIP"])
	assert.Equal(t, []any{ip}, nextSpec["clusterIPs"])
	assert.Equal(t, nodePort, nextSpec["ports"].([]any)[0].(map[string]any)["nodePort"])
}

func TestEventsV1View(t *testing.T) {
	t.Parallel()
	view := lookup(t, kinds.New(), "events.k8s.io", "v1", "events")
	core := decode(t, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"web.1","namespace":"default"},
		"involvedObject":{"kind":"Deployment","name":"web","namespace":"default"},"reason":"Scaled","message":"scaled to 3",
		"source":{"component":"deployment-controller"},"firstTimestamp":"2026-11-24T10:00:00Z","lastTimestamp":"2026-11-24T10:01:00Z",
		"count":4,"type":"Normal","eventTime":"2026-11-24T10:00:00.123456Z","series":{"count":4,"lastObservedTime":"2026-11-24T10:01:00.000001Z"},
		"action":"Scale","related":{"kind":"ReplicaSet","name":"web-1"},"reportingComponent":"ctrl","reportingInstance":"ctrl-1","severity":"Info"}`)
	v, err := view.Conversion.FromStorage(core)
	require.NoError(t, err)
	assert.Equal(t, "events.k8s.io/v1", v["apiVersion"])
	for k, want := range map[string]any{
		"note": "scaled to 3", "reportingController": "ctrl", "reportingInstance": "ctrl-1", "deprecatedCount": json.Number("4"),
		"deprecatedFirstTimestamp": "2026-11-24T10:00:00Z", "deprecatedLastTimestamp": "2026-11-24T10:01:00Z", "eventTime": "2026-11-24T10:00:00.123456Z",
	} {
		assert.Equal(t, want, v[k], k)
	}
	assert.Equal(t, "web", v["regarding"].(map[string]any)["name"])
	assert.Equal(t, "web-1", v["related"].(map[string]any)["name"])
	assert.Equal(t, "deployment-controller", v["deprecatedSource"].(map[string]any)["component"])
	assert.Equal(t, "2026-11-24T10:01:00.000001Z", v["series"].(map[string]any)["lastObservedTime"])
	assert.NotContains(t, v, "severity")
	uv, ok := view.Schema.(kinds.UpdateSchema)
	require.True(t, ok)
	errs, _ := uv.ValidateUpdate(v, v, "")
	assert.Empty(t, errs, "the view of an Event a v1 client wrote may be written back")
	assert.NotEmpty(t, view.Schema.Validate(v), "but not created through events.k8s.io: the deprecated fields must be unset")

	back, err := view.Conversion.ToStorage(v, core)
	require.NoError(t, err)
	assert.Equal(t, core, back, "the round trip loses nothing, severity included")
}

func TestTypedOpenAPI(t *testing.T) {
	t.Parallel()
	deploy := lookup(t, kinds.New(), "apps", "v1", "deployments")
	d, ok := deploy.Schema.(kinds.Definer)
	require.True(t, ok)
	root, defs := d.Definitions()
	assert.Equal(t, "io.k8s.api.apps.v1.Deployment", root)
	schema := func(name string) map[string]any {
		t.Helper()
		require.Contains(t, defs, name)
		var m map[string]any
		require.NoError(t, json.Unmarshal(defs[name], &m))
		return m
	}
	spec := schema("io.k8s.api.apps.v1.DeploymentSpec")
	assert.Equal(t, []any{"selector", "template"}, spec["required"])
	props := spec["properties"].(map[string]any)
	assert.Contains(t, props["replicas"].(map[string]any)["description"], "Number of desired pods.")
	assert.Equal(t, "int32", props["replicas"].(map[string]any)["format"])
	assert.Equal(t, []any{map[string]any{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"}}, props["strategy"].(map[string]any)["allOf"])
	assert.Contains(t, schema("io.k8s.api.apps.v1.DeploymentStrategy")["description"], "DeploymentStrategy describes how to replace existing pods")

	containers := schema("io.k8s.api.core.v1.PodSpec")["properties"].(map[string]any)["containers"].(map[string]any)
	assert.Equal(t, "map", containers["x-kubernetes-list-type"], "list keys from the structured-merge-diff schema")
	assert.Equal(t, []any{"name"}, containers["x-kubernetes-list-map-keys"])
	assert.Equal(t, "merge", containers["x-kubernetes-patch-strategy"])
	assert.Equal(t, "name", containers["x-kubernetes-patch-merge-key"])
	assert.Equal(t, "int-or-string", schema("io.k8s.apimachinery.pkg.util.intstr.IntOrString")["format"])
	assert.Equal(t, "atomic", schema("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")["x-kubernetes-map-type"])
	assert.Contains(t, defs, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
}
