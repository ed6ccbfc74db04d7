package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The built-in kinds of SPEC §14 through client-go's default clientset, which sends protobuf.

// object is a pointer to a built-in kind's Go type.
type object[T any] interface {
	*T
	metav1.Object
	runtime.Object
}

// typedClient is the part of every generated typed client the table uses.
type typedClient[P any] interface {
	Create(ctx context.Context, obj P, opts metav1.CreateOptions) (P, error)
	Update(ctx context.Context, obj P, opts metav1.UpdateOptions) (P, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (P, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// exercise creates obj, updates its labels, patches it with the strategic merge patch patch and
// checks the result, and requires a watch started before to see the three writes in order.
func exercise[T any, P object[T]](t *testing.T, c typedClient[P], obj P, patch string, check func(t *testing.T, patched P)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + obj.GetName()})
	require.NoError(t, err)
	defer w.Stop()

	created, err := c.Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, created.GetUID())
	created.SetLabels(map[string]string{"updated": "yes"})
	updated, err := c.Update(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "yes", updated.GetLabels()["updated"])
	assert.NotEqual(t, created.GetResourceVersion(), updated.GetResourceVersion())
	patched, err := c.Patch(ctx, obj.GetName(), types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, "yes", patched.GetLabels()["updated"], "a patch keeps what it does not name")
	check(t, patched)

	want := []struct {
		typ watch.EventType
		rv  string
	}{{watch.Added, created.GetResourceVersion()}, {watch.Modified, updated.GetResourceVersion()}, {watch.Modified, patched.GetResourceVersion()}}
	for _, ev := range want {
		select {
		case got, ok := <-w.ResultChan():
			require.True(t, ok, "the watch ended early")
			require.Equal(t, ev.typ, got.Type, "%v", got.Object)
			o, ok := got.Object.(P)
			require.True(t, ok, "watch object is %T", got.Object)
			assert.Equal(t, ev.rv, o.GetResourceVersion())
		case <-ctx.Done():
			t.Fatalf("no %s event", ev.typ)
		}
	}
}

// contentTypes records the Content-Type of every write request of the clients made from a
// rest.Config whose WrapTransport is its wrap.
type contentTypes struct {
	mu   sync.Mutex
	seen map[string]string // "METHOD path" → Content-Type
}

func (c *contentTypes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			c.mu.Lock()
			c.seen[r.Method+" "+r.URL.Path] = r.Header.Get("Content-Type")
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// find returns the Content-Type of a recorded request whose "METHOD path" starts with prefix.
func (c *contentTypes) find(prefix string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.seen {
		if strings.HasPrefix(k, prefix) {
			return v, true
		}
	}
	return "", false
}

func podSpec(image string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}
}

func template(labels map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	s := podSpec("nginx:1.27")
	s.RestartPolicy = restart
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: s}
}

func TestClientGoBuiltinKinds(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ENABLE_CONTROLLER=false")
	cfg := p.restConfig()
	ct := &contentTypes{seen: map[string]string{}}
	cfg.WrapTransport = ct.wrap
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	const ns = "kinds"
	_, err = cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	md := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	sel := map[string]string{"app": "web"}
	// The webhook configurations are honoured (SPEC §15): an objectSelector that no object of this
	// test matches keeps them from judging its Deployments (their service cannot be reached).
	inert := &metav1.LabelSelector{MatchLabels: map[string]string{"kinds-test/judged": "never"}}
	hook := func(name string) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations, *admissionregistrationv1.SideEffectClass) {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name}},
			[]admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}},
			ptr.To(admissionregistrationv1.SideEffectClassNone)
	}
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"ConfigMap", func(t *testing.T) {
			exercise(t, cs.CoreV1().ConfigMaps(ns), &corev1.ConfigMap{ObjectMeta: md("cm"), Data: map[string]string{"a": "1"}}, `{"data":{"b":"2"}}`,
				func(t *testing.T, got *corev1.ConfigMap) {
					assert.Equal(t, map[string]string{"a": "1", "b": "2"}, got.Data)
				})
		}},
		{"Secret", func(t *testing.T) {
			exercise(t, cs.CoreV1().Secrets(ns), &corev1.Secret{ObjectMeta: md("secret"), StringData: map[string]string{"user": "admin"}}, `{"stringData":{"password":"s3cret"}}`,
				func(t *testing.T, got *corev1.Secret) {
					assert.Equal(t, corev1.SecretTypeOpaque, got.Type)
					assert.Equal(t, map[string][]byte{"user": []byte("admin"), "password": []byte("s3cret")}, got.Data, "stringData is merged into data")
					assert.Empty(t, got.StringData)
				})
		}},
		{"DeletePropagation", func(t *testing.T) {
			// client-go sends DeleteOptions as protobuf; its propagationPolicy sets the garbage
			// collector's finalizer (no collector runs here to remove it).
			cms := cs.CoreV1().ConfigMaps(ns)
			_, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: md("orphan-me")}, metav1.CreateOptions{})
			require.NoError(t, err)
			require.NoError(t, cms.Delete(context.Background(), "orphan-me", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}))
			got, err := cms.Get(context.Background(), "orphan-me", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, []string{metav1.FinalizerOrphanDependents}, got.Finalizers)
			assert.NotNil(t, got.DeletionTimestamp)
			require.NoError(t, cms.Delete(context.Background(), "orphan-me", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
			_, err = cms.Get(context.Background(), "orphan-me", metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "Background takes the finalizer away: %v", err)
		}},
		{"ServiceAccount", func(t *testing.T) {
			exercise(t, cs.CoreV1().ServiceAccounts(ns), &corev1.ServiceAccount{ObjectMeta: md("sa")}, `{"automountServiceAccountToken":false}`,
				func(t *testing.T, got *corev1.ServiceAccount) {
					assert.Equal(t, ptr.To(false), got.AutomountServiceAccountToken)
				})
		}},
		{"Service", func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: md("svc"), Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
			exercise(t, cs.CoreV1().Services(ns), svc, `{"spec":{"ports":[{"name":"https","port":443,"targetPort":8443}]}}`, func(t *testing.T, got *corev1.Service) {
				assert.Equal(t, corev1.ServiceTypeClusterIP, got.Spec.Type)
				assert.Equal(t, corev1.ServiceAffinityNone, got.Spec.SessionAffinity)
				assert.NotEmpty(t, got.Spec.ClusterIP)
				require.Len(t, got.Spec.Ports, 2, "ports merge by their key, port")
				for _, p := range got.Spec.Ports {
					assert.Equal(t, corev1.ProtocolTCP, p.Protocol)
					if p.Name == "http" {
						assert.Equal(t, intstr.FromInt32(80), p.TargetPort, "targetPort defaults to port")
					} else {
						assert.Equal(t, intstr.FromInt32(8443), p.TargetPort)
					}
				}
			})
		}},
		{"Pod", func(t *testing.T) {
			exercise(t, cs.CoreV1().Pods(ns), &corev1.Pod{ObjectMeta: md("pod"), Spec: podSpec("nginx")}, `{"spec":{"containers":[{"name":"app","image":"nginx:1.28"}]}}`,
				func(t *testing.T, got *corev1.Pod) {
					require.Len(t, got.Spec.Containers, 1, "containers merge by name")
					c := got.Spec.Containers[0]
					assert.Equal(t, "nginx:1.28", c.Image)
					assert.Equal(t, corev1.PullAlways, c.ImagePullPolicy, "defaulted for the untagged image on create")
					assert.Equal(t, corev1.RestartPolicyAlways, got.Spec.RestartPolicy)
					assert.Equal(t, corev1.PodPending, got.Status.Phase)
					assert.Equal(t, corev1.PodQOSBestEffort, got.Status.QOSClass)
				})
		}},
		{"PersistentVolumeClaim", func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: md("pvc"), Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
			// An unbound claim's spec is immutable (kube-apiserver's validation): the patch names
			// its metadata.
			exercise(t, cs.CoreV1().PersistentVolumeClaims(ns), pvc, `{"metadata":{"annotations":{"tier":"gold"}}}`, func(t *testing.T, got *corev1.PersistentVolumeClaim) {
				assert.Equal(t, "gold", got.Annotations["tier"])
				assert.Equal(t, "1Gi", ptr.To(got.Spec.Resources.Requests[corev1.ResourceStorage]).String())
				assert.Equal(t, []string{"kubernetes.io/pvc-protection"}, got.Finalizers)
				assert.Equal(t, ptr.To(corev1.PersistentVolumeFilesystem), got.Spec.VolumeMode)
				assert.Equal(t, corev1.ClaimPending, got.Status.Phase)
			})
		}},
		{"Endpoints", func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: md("ep"), Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
			exercise(t, cs.CoreV1().Endpoints(ns), ep, `{"subsets":[{"addresses":[{"ip":"10.0.0.2"}],"ports":[{"port":8080}]}]}`, func(t *testing.T, got *corev1.Endpoints) {
				require.Len(t, got.Subsets, 1)
				assert.Equal(t, "10.0.0.2", got.Subsets[0].Addresses[0].IP)
				assert.Equal(t, corev1.ProtocolTCP, got.Subsets[0].Ports[0].Protocol)
			})
		}},
		{"Deployment", func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: md("deploy"), Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: template(sel, "")}}
			exercise(t, cs.AppsV1().Deployments(ns), d, `{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"A","value":"1"}]}]}}}}`, func(t *testing.T, got *appsv1.Deployment) {
				assert.Equal(t, ptr.To[int32](1), got.Spec.Replicas)
				assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, got.Spec.Strategy.Type)
				assert.Equal(t, ptr.To(intstr.FromString("25%")), got.Spec.Strategy.RollingUpdate.MaxSurge)
				assert.Equal(t, ptr.To[int32](10), got.Spec.RevisionHistoryLimit)
				assert.Equal(t, ptr.To[int32](600), got.Spec.ProgressDeadlineSeconds)
				require.Len(t, got.Spec.Template.Spec.Containers, 1)
				c := got.Spec.Template.Spec.Containers[0]
				assert.Equal(t, "nginx:1.27", c.Image, "the patch merged into the container named app")
				assert.Equal(t, []corev1.EnvVar{{Name: "A", Value: "1"}}, c.Env)
				assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
			})
		}},
		{"ReplicaSet", func(t *testing.T) {
			rs := &appsv1.ReplicaSet{ObjectMeta: md("rs"), Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: template(sel, "")}}
			exercise(t, cs.AppsV1().ReplicaSets(ns), rs, `{"spec":{"replicas":2}}`, func(t *testing.T, got *appsv1.ReplicaSet) {
				assert.Equal(t, ptr.To[int32](2), got.Spec.Replicas)
			})
		}},
		{"StatefulSet", func(t *testing.T) {
			s := &appsv1.StatefulSet{ObjectMeta: md("sts"), Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: template(sel, "")}}
			exercise(t, cs.AppsV1().StatefulSets(ns), s, `{"spec":{"replicas":3}}`, func(t *testing.T, got *appsv1.StatefulSet) {
				assert.Equal(t, ptr.To[int32](3), got.Spec.Replicas)
				assert.Equal(t, appsv1.OrderedReadyPodManagement, got.Spec.PodManagementPolicy)
				assert.Equal(t, ptr.To[int32](0), got.Spec.UpdateStrategy.RollingUpdate.Partition)
			})
		}},
		{"DaemonSet", func(t *testing.T) {
			d := &appsv1.DaemonSet{ObjectMeta: md("ds"), Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: template(sel, "")}}
			exercise(t, cs.AppsV1().DaemonSets(ns), d, `{"spec":{"minReadySeconds":5}}`, func(t *testing.T, got *appsv1.DaemonSet) {
				assert.Equal(t, int32(5), got.Spec.MinReadySeconds)
				assert.Equal(t, ptr.To(intstr.FromInt32(1)), got.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable)
			})
		}},
		{"Job", func(t *testing.T) {
			j := &batchv1.Job{ObjectMeta: md("job"), Spec: batchv1.JobSpec{Template: template(nil, corev1.RestartPolicyNever)}}
			exercise(t, cs.BatchV1().Jobs(ns), j, `{"spec":{"activeDeadlineSeconds":60}}`, func(t *testing.T, got *batchv1.Job) {
				assert.Equal(t, ptr.To[int64](60), got.Spec.ActiveDeadlineSeconds)
				assert.Equal(t, ptr.To[int32](1), got.Spec.Completions)
				assert.Equal(t, ptr.To[int32](6), got.Spec.BackoffLimit)
			})
		}},
		{"CronJob", func(t *testing.T) {
			c := &batchv1.CronJob{ObjectMeta: md("cj"), Spec: batchv1.CronJobSpec{Schedule: "* * * * *",
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template(nil, corev1.RestartPolicyOnFailure)}}}}
			exercise(t, cs.BatchV1().CronJobs(ns), c, `{"spec":{"schedule":"*/5 * * * *"}}`, func(t *testing.T, got *batchv1.CronJob) {
				assert.Equal(t, "*/5 * * * *", got.Spec.Schedule)
				assert.Equal(t, batchv1.AllowConcurrent, got.Spec.ConcurrencyPolicy)
				assert.Equal(t, ptr.To[int32](3), got.Spec.SuccessfulJobsHistoryLimit)
			})
		}},
		{"Role", func(t *testing.T) {
			r := &rbacv1.Role{ObjectMeta: md("role"), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
			exercise(t, cs.RbacV1().Roles(ns), r, `{"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}]}`, func(t *testing.T, got *rbacv1.Role) {
				assert.Equal(t, []string{"get", "list"}, got.Rules[0].Verbs)
			})
		}},
		{"RoleBinding", func(t *testing.T) {
			b := &rbacv1.RoleBinding{ObjectMeta: md("rb"), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "role"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "ann"}}}
			exercise(t, cs.RbacV1().RoleBindings(ns), b, `{"subjects":[{"kind":"ServiceAccount","name":"sa","namespace":"kinds"}]}`, func(t *testing.T, got *rbacv1.RoleBinding) {
				assert.Equal(t, rbacv1.GroupName, got.RoleRef.APIGroup)
				require.Len(t, got.Subjects, 1)
				assert.Equal(t, "sa", got.Subjects[0].Name)
			})
		}},
		{"ClusterRole", func(t *testing.T) {
			r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kinds-cr"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}}}}
			exercise(t, cs.RbacV1().ClusterRoles(), r, `{"metadata":{"annotations":{"a":"b"}}}`, func(t *testing.T, got *rbacv1.ClusterRole) {
				assert.Equal(t, "b", got.Annotations["a"])
				assert.Equal(t, []string{"get"}, got.Rules[0].Verbs)
			})
		}},
		{"ClusterRoleBinding", func(t *testing.T) {
			b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kinds-crb"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "kinds-cr"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "devs"}}}
			exercise(t, cs.RbacV1().ClusterRoleBindings(), b, `{"metadata":{"annotations":{"a":"b"}}}`, func(t *testing.T, got *rbacv1.ClusterRoleBinding) {
				assert.Equal(t, rbacv1.GroupName, got.Subjects[0].APIGroup)
			})
		}},
		{"Ingress", func(t *testing.T) {
			in := &networkingv1.Ingress{ObjectMeta: md("ing"), Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.com"}}}}
			exercise(t, cs.NetworkingV1().Ingresses(ns), in, `{"spec":{"ingressClassName":"nginx"}}`, func(t *testing.T, got *networkingv1.Ingress) {
				assert.Equal(t, ptr.To("nginx"), got.Spec.IngressClassName)
				assert.Equal(t, "web.example.com", got.Spec.Rules[0].Host)
			})
		}},
		{"NetworkPolicy", func(t *testing.T) {
			np := &networkingv1.NetworkPolicy{ObjectMeta: md("np"), Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}}}
			exercise(t, cs.NetworkingV1().NetworkPolicies(ns), np, `{"spec":{"egress":[{}]}}`, func(t *testing.T, got *networkingv1.NetworkPolicy) {
				assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, got.Spec.PolicyTypes, "defaulted on create, kept after")
				assert.Len(t, got.Spec.Egress, 1)
			})
		}},
		{"PodDisruptionBudget", func(t *testing.T) {
			pdb := &policyv1.PodDisruptionBudget{ObjectMeta: md("pdb"), Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: sel}}}
			exercise(t, cs.PolicyV1().PodDisruptionBudgets(ns), pdb, `{"spec":{"minAvailable":"50%"}}`, func(t *testing.T, got *policyv1.PodDisruptionBudget) {
				assert.Equal(t, ptr.To(intstr.FromString("50%")), got.Spec.MinAvailable)
			})
		}},
		{"ValidatingWebhookConfiguration", func(t *testing.T) {
			cc, rules, se := hook("v")
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kinds-v"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{
				{Name: "a.example.com", ClientConfig: cc, Rules: rules, SideEffects: se, AdmissionReviewVersions: []string{"v1"}, ObjectSelector: inert}}}
			exercise(t, cs.AdmissionregistrationV1().ValidatingWebhookConfigurations(), v, `{"webhooks":[{"name":"a.example.com","timeoutSeconds":5}]}`,
				func(t *testing.T, got *admissionregistrationv1.ValidatingWebhookConfiguration) {
					require.Len(t, got.Webhooks, 1, "webhooks merge by name")
					w := got.Webhooks[0]
					assert.Equal(t, ptr.To[int32](5), w.TimeoutSeconds)
					assert.Equal(t, ptr.To(admissionregistrationv1.Fail), w.FailurePolicy)
					assert.Equal(t, ptr.To[int32](443), w.ClientConfig.Service.Port)
					assert.Equal(t, ptr.To(admissionregistrationv1.AllScopes), w.Rules[0].Scope)
				})
		}},
		{"MutatingWebhookConfiguration", func(t *testing.T) {
			cc, rules, se := hook("m")
			m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kinds-m"}, Webhooks: []admissionregistrationv1.MutatingWebhook{
				{Name: "a.example.com", ClientConfig: cc, Rules: rules, SideEffects: se, AdmissionReviewVersions: []string{"v1"}, ObjectSelector: inert}}}
			exercise(t, cs.AdmissionregistrationV1().MutatingWebhookConfigurations(), m, `{"webhooks":[{"name":"a.example.com","timeoutSeconds":5}]}`,
				func(t *testing.T, got *admissionregistrationv1.MutatingWebhookConfiguration) {
					require.Len(t, got.Webhooks, 1)
					assert.Equal(t, ptr.To(admissionregistrationv1.NeverReinvocationPolicy), got.Webhooks[0].ReinvocationPolicy)
				})
		}},
		{"events.k8s.io Event", func(t *testing.T) {
			ev := &eventsv1.Event{ObjectMeta: md("deploy.1"), EventTime: now, ReportingController: "kinds-test", ReportingInstance: "kinds-test-1",
				Action: "Scale", Reason: "Scaled", Note: "scaled to 2", Type: corev1.EventTypeNormal,
				Regarding: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "deploy"}}
			later := metav1.NewMicroTime(now.Add(time.Second))
			exercise(t, cs.EventsV1().Events(ns), ev, `{"series":{"count":2,"lastObservedTime":"`+later.Format(metav1.RFC3339Micro)+`"}}`, func(t *testing.T, got *eventsv1.Event) {
				require.NotNil(t, got.Series)
				assert.Equal(t, int32(2), got.Series.Count)
				assert.True(t, later.Equal(&got.Series.LastObservedTime))
				assert.Equal(t, "scaled to 2", got.Note)
				assert.True(t, now.Equal(&got.EventTime))
				// The same object through core/v1.
				core, err := cs.CoreV1().Events(ns).Get(context.Background(), "deploy.1", metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, "scaled to 2", core.Message)
				assert.Equal(t, "Deployment", core.InvolvedObject.Kind)
				assert.Equal(t, "kinds-test", core.ReportingController)
				require.NotNil(t, core.Series)
				assert.Equal(t, int32(2), core.Series.Count)
				// Listed through the view, selected by the view's field names.
				list, err := cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=deploy,reason=Scaled"})
				require.NoError(t, err)
				require.Len(t, list.Items, 1)
				assert.Equal(t, "scaled to 2", list.Items[0].Note)
			})
		}},
	}
	t.Run("kinds", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				tt.run(t)
			})
		}
	})
	t.Run("protobuf", func(t *testing.T) {
		ct.mu.Lock()
		defer ct.mu.Unlock()
		for _, path := range []string{"POST /apis/apps/v1/namespaces/kinds/deployments", "PUT /api/v1/namespaces/kinds/configmaps/cm", "POST /apis/events.k8s.io/v1/namespaces/kinds/events",
			"DELETE /api/v1/namespaces/kinds/configmaps/orphan-me"} {
			assert.Equal(t, "application/vnd.kubernetes.protobuf", ct.seen[path], path)
		}
	})
}

// TestClientGoScaleStatusApply covers the subresources and server-side apply of built-in kinds
// through the default clientset: the scale of a Deployment (protobuf autoscaling/v1 Scale), a
// Pod's status, and two field managers applying to one container list, merged by its key.
func TestClientGoScaleStatusApply(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ENABLE_CONTROLLER=false")
	cs, err := kubernetes.NewForConfig(p.restConfig())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sel := map[string]string{"app": "web"}

	deps := cs.AppsV1().Deployments("default")
	_, err = deps.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: template(sel, "")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sc, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(3), sc.Spec.Replicas)
	assert.Equal(t, "app=web", sc.Status.Selector)
	sc, err = deps.UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: sc.ResourceVersion}, Spec: autoscalingv1.ScaleSpec{Replicas: 5}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(5), sc.Spec.Replicas)
	d, err := deps.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, ptr.To[int32](5), d.Spec.Replicas)
	assert.Equal(t, int64(2), d.Generation)

	// Status: pods/status writes status only; a main-resource write keeps it.
	pods := cs.CoreV1().Pods("default")
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: podSpec("nginx:1.27")}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = "10.0.0.7"
	pod.Spec.Containers[0].Image = "ignored:1"
	pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	assert.Equal(t, "nginx:1.27", pod.Spec.Containers[0].Image, "a status write changes only status")
	running, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
	require.NoError(t, err)
	assert.Len(t, running.Items, 1)

	// Server-side apply: two managers own different env vars of the container named app; the
	// real list keys (containers by name, env by name) merge them instead of conflicting.
	apply := func(manager, env string) *appsv1.Deployment {
		ac := appsv1ac.Deployment("web", "default").WithSpec(appsv1ac.DeploymentSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(sel)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(sel).WithSpec(corev1ac.PodSpec().WithContainers(
				corev1ac.Container().WithName("app").WithImage("nginx:1.27").WithEnv(corev1ac.EnvVar().WithName(env).WithValue(manager))))))
		got, err := deps.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: manager})
		require.NoError(t, err, manager)
		return got
	}
	apply("first", "A")
	got := apply("second", "B")
	require.Len(t, got.Spec.Template.Spec.Containers, 1)
	assert.ElementsMatch(t, []corev1.EnvVar{{Name: "A", Value: "first"}, {Name: "B", Value: "second"}}, got.Spec.Template.Spec.Containers[0].Env)
	var managers []string
	for _, m := range got.ManagedFields {
		managers = append(managers, m.Manager)
	}
	assert.Subset(t, managers, []string{"first", "second"})
	// A field another manager owns is a conflict.
	replicas := func(n int32) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("web", "default").WithSpec(appsv1ac.DeploymentSpec().WithReplicas(n))
	}
	_, err = deps.Apply(ctx, replicas(9), metav1.ApplyOptions{FieldManager: "third"})
	assert.True(t, apierrors.IsConflict(err), "replicas set by the create belong to its manager: %v", err)
	_, err = deps.Apply(ctx, replicas(9), metav1.ApplyOptions{FieldManager: "third", Force: true})
	require.NoError(t, err)
	_, err = deps.Apply(ctx, replicas(1), metav1.ApplyOptions{FieldManager: "fourth"})
	assert.True(t, apierrors.IsConflict(err), "%v", err)
}

// TestKubectlBuiltinKinds runs the kubectl commands operator authors start with against the
// kinds of SPEC §14, as on a real cluster (Deployments roll out and Jobs complete: see
// TestKubectlRollout).
func TestKubectlBuiltinKinds(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false")
	k := p.kubectl(t)

	res := k.Run("api-resources")
	for _, want := range []string{`deployments\s+deploy\s+apps/v1\s+true\s+Deployment`, `configmaps\s+cm\s+v1\s+true\s+ConfigMap`,
		`events\s+ev\s+events.k8s.io/v1\s+true\s+Event`, `clusterroles\s+rbac.authorization.k8s.io/v1\s+false\s+ClusterRole`} {
		assert.Regexp(t, want, res)
	}

	assert.Contains(t, k.Run("create", "deployment", "web", "--image=nginx:1.27", "--replicas=3"), "deployment.apps/web created")
	assert.Regexp(t, `NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\nweb\s+[0-3]/3\s+[03]\s+[0-3]\s+\d+s`, k.Run("get", "deployment", "web"))
	assert.Equal(t, "RollingUpdate 25% 10 600 IfNotPresent", k.Run("get", "deploy", "web", "-o",
		"jsonpath={.spec.strategy.type} {.spec.strategy.rollingUpdate.maxSurge} {.spec.revisionHistoryLimit} {.spec.progressDeadlineSeconds} {.spec.template.spec.containers[0].imagePullPolicy}"))
	assert.Contains(t, k.Run("scale", "deployment", "web", "--replicas=5"), "deployment.apps/web scaled")
	assert.Equal(t, "5", k.Run("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"))
	assert.Regexp(t, `Replicas:\s+5 desired`, k.Run("describe", "deployment", "web"))

	assert.Contains(t, k.Run("create", "configmap", "settings", "--from-literal=mode=fast", "--from-literal=level=3"), "configmap/settings created")
	assert.Regexp(t, `settings\s+2\s+\d+s`, k.Run("get", "configmap", "settings"))
	assert.Contains(t, k.Run("create", "secret", "generic", "creds", "--from-literal=password=s3cret"), "secret/creds created")
	assert.Regexp(t, `creds\s+Opaque\s+1\s+\d+s`, k.Run("get", "secret", "creds"))
	assert.Equal(t, "czNjcmV0", k.Run("get", "secret", "creds", "-o", "jsonpath={.data.password}"))
	assert.Contains(t, k.Run("create", "service", "clusterip", "web", "--tcp=80:8080"), "service/web created")
	assert.Regexp(t, `web\s+ClusterIP\s+10\.\d+\.\d+\.\d+\s+<none>\s+80/TCP\s+\d+s`, k.Run("get", "service", "web"))
	assert.Contains(t, k.Run("create", "job", "once", "--image=busybox:1.36", "--", "echo", "hi"), "job.batch/once created")
	assert.Regexp(t, `once\s+(Running\s+0/1|Complete\s+1/1)\s+\d+s`, k.Run("get", "job", "once"))

	all := k.Run("get", "all")
	for _, want := range []string{"service/web", "deployment.apps/web", "job.batch/once"} {
		assert.Contains(t, all, want)
	}
	assert.NotContains(t, all, "configmap", "configmaps are not in the all category")

	explain := k.Run("explain", "deployment.spec.strategy")
	for _, want := range []string{"KIND:       Deployment", "FIELD: strategy <DeploymentStrategy>",
		"The deployment strategy to use to replace existing pods with new ones.", "rollingUpdate\t<RollingUpdateDeployment>", "type\t<string>"} {
		assert.Contains(t, explain, want)
	}
	assert.Contains(t, k.Run("explain", "deployment.spec.replicas"), "Number of desired pods.")

	// kubectl apply validates on the server (fieldValidation=Strict) and merges with the Go
	// type's strategy; a second apply changes nothing.
	manifest := filepath.Join(t.TempDir(), "api.yaml")
	write := func(extra string) {
		require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 2`+extra+`
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: nginx:1.27
        ports:
        - containerPort: 80
`), 0o600))
	}
	write("\n  bogus: 1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := k.Cmd(ctx, "apply", "-f", manifest).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), `unknown field "spec.bogus"`)
	warned := k.Run("apply", "--validate=warn", "--dry-run=server", "-f", manifest)
	assert.Contains(t, warned, `Warning: unknown field "spec.bogus"`)
	assert.Contains(t, warned, "deployment.apps/api created (server dry run)")
	write("")
	assert.Contains(t, k.Run("apply", "-f", manifest), "deployment.apps/api created")
	assert.Contains(t, k.Run("apply", "-f", manifest), "deployment.apps/api unchanged")
	assert.Contains(t, k.Run("apply", "--server-side", "-f", manifest), "deployment.apps/api serverside-applied")
	assert.Equal(t, "TCP", k.Run("get", "deploy", "api", "-o", "jsonpath={.spec.template.spec.containers[0].ports[0].protocol}"))
	assert.Contains(t, k.Run("delete", "deployment", "api", "web"), `deployment.apps "web" deleted`)
}
