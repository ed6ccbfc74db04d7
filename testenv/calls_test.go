package testenv_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/testenv"
)

// TestCallsRecord: a client-go client's calls are recorded with their user agent, verb,
// resource, namespace, name, code, reason, field manager, selectors and the resourceVersion
// they produced or read, and the assertion helpers read them.
func TestCallsRecord(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = "calls-test/v1"
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		metav1.CreateOptions{FieldManager: "tester"})
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "missing", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
	require.NoError(t, err)

	got := env.Calls(calls.Filter{Agent: "calls-test"})
	testenv.ExactCalls(t, got, "create configmaps default/a", "get configmaps default/missing", "list configmaps default/")
	require.Len(t, got, 3)
	assert.Equal(t, int32(201), got[0].Code)
	assert.Equal(t, "tester", got[0].FieldManager)
	assert.Equal(t, cm.ResourceVersion, formatRV(got[0].ResourceVersion))
	assert.Equal(t, int32(404), got[1].Code)
	assert.Equal(t, "NotFound", got[1].Reason)
	assert.Equal(t, "app=x", got[2].LabelSelector())
	assert.Equal(t, list.ResourceVersion, formatRV(got[2].ResourceVersion))
	for _, c := range got {
		assert.Positive(t, c.Latency)
		assert.False(t, c.Internal)
	}
	testenv.NoWrites(&testing.T{}, got[1:]) // reads only: would not fail
	assert.True(t, testenv.NoWrites(t, got[1:]))
	inner := &testing.T{}
	assert.False(t, testenv.NoWrites(inner, got), "a create is a write")
}

// TestCallsWatch: a watch's call records how long it stayed open and how many events it
// carried.
func TestCallsWatch(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = "calls-watch/v1"
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	open := env.Calls(calls.Filter{Agent: "calls-watch", Verb: "watch"})
	require.Len(t, open, 1, "on record as soon as its stream begins")
	assert.True(t, open[0].Open)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	for _, name := range []string{"a", "b"} {
		_, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for range 2 {
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
			t.Fatal("no event")
		}
	}
	w.Stop()
	var watch []calls.Call
	require.Eventually(t, func() bool {
		watch = env.Calls(calls.Filter{Agent: "calls-watch", Verb: "watch"})
		return len(watch) == 1 && !watch[0].Open
	}, 10*time.Second, 10*time.Millisecond, "the watch's call is finished when it ends")
	assert.Positive(t, watch[0].Latency, "how long it stayed open")
	assert.Equal(t, int64(2), watch[0].WatchEvents)
	assert.Equal(t, int32(200), watch[0].Code)
}

// TestCallsRoles: with RBAC on, a user's forbidden calls are recorded; the generated Role
// allows exactly what it did, and once applied the same calls succeed.
func TestCallsRoles(t *testing.T) {
	env := testenv.New(t, testenv.Options{RBAC: true})
	const user = "system:serviceaccount:default:operator"
	u, err := env.AddUser(testenv.User{Name: user}, nil)
	require.NoError(t, err)
	cs := kubernetes.NewForConfigOrDie(u.Config())
	ctx := t.Context()
	work := func() error {
		if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		if _, err := cs.CoreV1().Secrets("default").Get(ctx, "s", metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		_, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err
	}
	require.True(t, apierrors.IsForbidden(work()))

	roles := env.Roles(user, calls.RoleOptions{})
	require.Len(t, roles.Forbidden, 1, "work stopped at its first refusal")
	assert.Equal(t, "list", roles.Forbidden[0].Call.Verb)
	// Let it run further: grant what the first pass found, and repeat until it succeeds.
	admin := kubernetes.NewForConfigOrDie(env.Config)
	for range 4 {
		apply(t, admin, env.Roles(user, calls.RoleOptions{}))
		if err = work(); err == nil {
			break
		}
	}
	require.NoError(t, err, "the generated roles allow what the user does")
	roles = env.Roles(user, calls.RoleOptions{})
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
	}, roles.Namespace["default"])
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}, roles.Namespace[""])
	named := env.Roles(user, calls.RoleOptions{Names: true})
	assert.Equal(t, []string{"s"}, named.Namespace["default"][1].ResourceNames)
}

// apply creates or updates the generated roles and bindings, decoded from their YAML.
func apply(t *testing.T, admin *kubernetes.Clientset, roles calls.Roles) {
	t.Helper()
	y, err := roles.YAML()
	require.NoError(t, err)
	ctx := t.Context()
	dec := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(string(y))))
	for {
		doc, err := dec.Read()
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
		var tm metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &tm))
		switch tm.Kind {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			require.NoError(t, yaml.Unmarshal(doc, &o))
			_ = admin.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			require.NoError(t, yaml.Unmarshal(doc, &o))
			_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			require.NoError(t, yaml.Unmarshal(doc, &o))
			_ = admin.RbacV1().Roles(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
			_, err = admin.RbacV1().Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			require.NoError(t, yaml.Unmarshal(doc, &o))
			_ = admin.RbacV1().RoleBindings(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
			_, err = admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected kind %q in:\n%s", tm.Kind, y)
		}
		require.NoError(t, err)
	}
}

// TestCallsHTTP: GET /calls answers JSON and, asked as kubectl asks, a Table; /calls/rbac
// answers YAML.
func TestCallsHTTP(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	get := func(path, accept string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, env.Config.Host+path, nil)
		require.NoError(t, err)
		req.Header.Set("User-Agent", "calls-http")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}
	code, _ := get("/api/v1/namespaces/default/configmaps/nothing", "")
	require.Equal(t, http.StatusNotFound, code)

	code, body := get("/calls?agent=calls-http&code=404", "")
	require.Equal(t, http.StatusOK, code, "%s", body)
	var list calls.List
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Items, 1)
	assert.Equal(t, "get", list.Items[0].Verb)
	assert.Equal(t, "nothing", list.Items[0].Name)
	assert.Equal(t, calls.DefaultSize, list.Size)

	code, body = get("/calls?agent=calls-http&code=404", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	require.Equal(t, http.StatusOK, code, "%s", body)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(body, &table))
	assert.Equal(t, "Table", table.Kind)
	require.Len(t, table.Rows, 1)
	assert.Equal(t, "configmaps", table.Rows[0].Cells[4])

	code, body = get("/calls?code=abc", "")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, string(body), "is not an HTTP status code")

	code, body = get("/calls/rbac", "")
	assert.Equal(t, http.StatusBadRequest, code, "%s", body)
}

// TestCallsAuditLog: AUDIT_LOG_PATH writes the calls as audit.k8s.io/v1 Events that
// k8s.io/apiserver's audit types read, with the fields kube-apiserver gives them (compared
// with lines a kube-apiserver v1.37.2 wrote: testdata/kube-apiserver-audit.jsonl).
func TestCallsAuditLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources: [{group: "", resources: ["secrets"]}]
- level: Request
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
`), 0o600))
	opts := testenv.Options{RBAC: true}
	opts.Server.AuditLogPath, opts.Server.AuditPolicyFile = path, policy
	env := testenv.New(t, opts)
	u, err := env.AddUser(testenv.User{Name: "alice", Groups: []string{"system:masters"}}, nil)
	require.NoError(t, err)
	cfg := u.Config()
	cfg.UserAgent = "calls-audit/v1"
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
	require.NoError(t, err)

	events := readAudit(t, path, "calls-audit")
	require.Len(t, events, 2, "secrets are at level None")
	create, list := events[0], events[1]
	assert.Equal(t, "Request", string(create.Level))
	assert.Equal(t, "ResponseComplete", string(create.Stage))
	assert.Equal(t, "create", create.Verb)
	assert.Equal(t, "/api/v1/namespaces/default/configmaps", create.RequestURI)
	assert.Equal(t, []string{"127.0.0.1"}, create.SourceIPs)
	assert.Equal(t, int32(201), create.ResponseStatus.Code)
	require.NotNil(t, create.ObjectRef)
	assert.Equal(t, "configmaps", create.ObjectRef.Resource)
	assert.Equal(t, "default", create.ObjectRef.Namespace)
	assert.Equal(t, "a", create.ObjectRef.Name)
	assert.Equal(t, "alice", create.User.Username)
	assert.Equal(t, []string{"system:masters", "system:authenticated"}, create.User.Groups)
	assert.Equal(t, "v1", create.ObjectRef.APIVersion)
	require.NotNil(t, create.RequestObject)
	assert.Contains(t, string(create.RequestObject.Raw), `"k":"v"`)
	assert.Equal(t, "allow", create.Annotations["authorization.k8s.io/decision"])
	assert.False(t, create.StageTimestamp.Before(&create.RequestReceivedTimestamp))
	assert.Equal(t, "Metadata", string(list.Level))
	assert.Equal(t, "list", list.Verb)
	assert.Nil(t, list.RequestObject)
	assert.Equal(t, "/api/v1/namespaces/default/pods?labelSelector=app%3Dx", list.RequestURI)

	// The same members, spelled the same way, as kube-apiserver's lines.
	kube, err := os.ReadFile("../calls/testdata/kube-apiserver-audit.jsonl")
	require.NoError(t, err)
	ours, err := os.ReadFile(path)
	require.NoError(t, err)
	kubeLine := strings.SplitN(string(kube), "\n", 2)[0]
	var ourLine string
	for _, l := range strings.Split(string(ours), "\n") {
		if strings.Contains(l, `"verb":"create"`) && strings.Contains(l, "calls-audit") {
			ourLine = l
		}
	}
	assert.Equal(t, members(t, kubeLine), members(t, ourLine))
}

// TestCallsAuditAnnotations: the audit annotations a ValidatingAdmissionPolicy makes (its
// auditAnnotations, as "<policy>/<key>", and the failures of an Audit binding, as
// "validation.policy.admission.k8s.io/validation_failure") are in the annotations of the
// call's audit Event from the stage ResponseComplete, as kube-apiserver's admission puts them
// in its audit context (k8s.io/apiserver's admission/audit.go); RequestReceived, logged before
// admission, has none.
func TestCallsAuditAnnotations(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o600))
	opts := testenv.Options{}
	opts.Server.AuditLogPath, opts.Server.AuditPolicyFile = path, policy
	env := testenv.New(t, opts)
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = "calls-annotations/v1"
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	_, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-passwords"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			Validations:      []admissionregistrationv1.Validation{{Expression: "!has(object.data) || !('password' in object.data)", Message: "no passwords in ConfigMaps"}},
			AuditAnnotations: []admissionregistrationv1.AuditAnnotation{{Key: "keys", ValueExpression: "string(has(object.data) ? size(object.data) : 0)"}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-passwords-audit"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-passwords",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	completed := func(name string) []auditv1.Event {
		var out []auditv1.Event
		for _, ev := range readAudit(t, path, "calls-annotations") {
			if ev.ObjectRef != nil && ev.ObjectRef.Resource == "configmaps" && ev.ObjectRef.Name == name {
				out = append(out, ev)
			}
		}
		return out
	}
	// The policy takes effect from a watch: probe with dry runs until one is annotated.
	assert.Eventually(t, func() bool {
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
		for _, ev := range completed("probe") {
			if ev.Annotations["no-passwords/keys"] != "" {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "the policy annotates a create")

	for name, data := range map[string]map[string]string{"plain": {"a": "1"}, "leaky": {"password": "x", "user": "u"}} {
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
		require.NoError(t, err, "an Audit binding does not deny")
	}
	const failureKey = "validation.policy.admission.k8s.io/validation_failure"
	for name, want := range map[string]struct {
		keys     string
		failures []validating.ValidationFailureValue
	}{
		"plain": {keys: "1"},
		"leaky": {keys: "2", failures: []validating.ValidationFailureValue{{Message: "no passwords in ConfigMaps", Policy: "no-passwords",
			Binding: "no-passwords-audit", ExpressionIndex: 0, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}}}},
	} {
		t.Run(name, func(t *testing.T) {
			events := completed(name)
			require.Len(t, events, 2)
			received, complete := events[0], events[1]
			assert.Equal(t, "RequestReceived", string(received.Stage))
			assert.NotContains(t, received.Annotations, "no-passwords/keys", "logged before admission")
			assert.Equal(t, "ResponseComplete", string(complete.Stage))
			assert.Equal(t, received.AuditID, complete.AuditID)
			assert.Equal(t, int32(201), complete.ResponseStatus.Code)
			assert.Equal(t, "allow", complete.Annotations["authorization.k8s.io/decision"])
			assert.Equal(t, want.keys, complete.Annotations["no-passwords/keys"])
			if want.failures == nil {
				assert.NotContains(t, complete.Annotations, failureKey)
				return
			}
			var failures []validating.ValidationFailureValue
			require.NoError(t, json.Unmarshal([]byte(complete.Annotations[failureKey]), &failures), complete.Annotations[failureKey])
			assert.Equal(t, want.failures, failures)
		})
	}
	// The ring keeps no annotations (the audit log's Sink alone gets them).
	for _, c := range env.Calls(calls.Filter{Agent: "calls-annotations", Name: "leaky"}) {
		assert.Nil(t, c.Annotations)
	}
}

// members are the top-level members of a JSON object, and those of its user, objectRef and
// responseStatus.
func members(t *testing.T, line string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(line), &m), line)
	var out []string
	for k, v := range m {
		out = append(out, k)
		if k == "user" || k == "objectRef" || k == "responseStatus" {
			var sub map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(v, &sub))
			for s := range sub {
				out = append(out, k+"."+s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// readAudit reads the audit log at path back with k8s.io/apiserver's audit types, keeping the
// events of calls whose user agent begins with agent.
func readAudit(t *testing.T, path, agent string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev auditv1.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
		require.Equal(t, "audit.k8s.io/v1", ev.APIVersion)
		require.Equal(t, "Event", ev.Kind)
		if strings.HasPrefix(ev.UserAgent, agent) {
			out = append(out, ev)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }

// TestCallsOfOneReconcile: opemu's own controllers' writes are on record, marked internal, with
// the reconcile that made them, and the reconcile filter returns exactly those.
func TestCallsOfOneReconcile(t *testing.T) {
	env := testenv.New(t, testenv.Options{Controller: true})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}}
	_, err := cs.AppsV1().Deployments("default").Create(t.Context(), dep, metav1.CreateOptions{})
	require.NoError(t, err)
	var rs []calls.Call
	require.Eventually(t, func() bool {
		rs = env.Calls(calls.Filter{Internal: "true", Verb: "create", Resource: "apps/replicasets", Namespace: "default"})
		return len(rs) > 0
	}, 20*time.Second, 10*time.Millisecond, "the Deployment controller's ReplicaSet")
	made := rs[0]
	assert.True(t, made.Internal)
	assert.NotEmpty(t, made.Component)
	assert.Equal(t, int32(201), made.Code)
	require.NotEmpty(t, made.Reconcile, "made while reconciling")
	same := env.Calls(calls.Filter{Reconcile: made.Reconcile})
	require.NotEmpty(t, same)
	assert.True(t, slices.ContainsFunc(same, func(c calls.Call) bool { return c.ID == made.ID }))
	for _, c := range same {
		assert.Equal(t, made.Reconcile, c.Reconcile)
		assert.True(t, c.Internal)
	}
}

// TestCallsStream: GET /calls/stream sends each new call the filter matches as an SSE frame
// (id: its ID, data: its JSON).
func TestCallsStream(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.Config.Host+"/calls/stream?agent=calls-stream", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = "calls-stream/v1"
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
	sc := bufio.NewScanner(resp.Body)
	var id string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			var view calls.View
			require.NoError(t, json.Unmarshal([]byte(v), &view))
			assert.Equal(t, "get", view.Verb)
			assert.Equal(t, "namespaces", view.Resource)
			assert.Equal(t, "default", view.Name)
			assert.Equal(t, id, strconv.FormatUint(view.ID, 10))
			return
		}
	}
	t.Fatalf("the stream ended without the call: %v", sc.Err())
}
