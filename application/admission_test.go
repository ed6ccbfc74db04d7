package application_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func appRequest(op webhooks.Operation, spec map[string]any) *webhooks.Request {
	return &webhooks.Request{
		UID:       "uid-1",
		Kind:      metav1.GroupVersionKind{Group: "cloudnative.elide.dev", Version: "v1", Kind: "Application"},
		Resource:  metav1.GroupVersionResource{Group: "cloudnative.elide.dev", Version: "v1", Resource: "applications"},
		Name:      "web",
		Namespace: "default",
		Operation: op,
		Object:    map[string]any{"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application", "metadata": map[string]any{"name": "web"}, "spec": spec},
	}
}

func chain(t *testing.T, rec webhooks.Recorder) *webhooks.Chain {
	t.Helper()
	c, err := application.NewChain(application.ChainConfig{
		AllowedRegistries: []string{"docker.io", "gcr.io"},
		BlockedImages:     []string{"ubuntu", "debian", "alpine"},
		Recorder:          rec,
	})
	require.NoError(t, err)
	return c
}

func TestDefaulter(t *testing.T) {
	t.Parallel()
	c := chain(t, nil)
	req := appRequest(webhooks.Create, map[string]any{"replicas": json.Number("1"), "image": "nginx:1.27"})
	res, err := c.Mutate(context.Background(), req)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	ops := map[string]any{}
	for _, op := range res.Patch {
		assert.Equal(t, "add", op.Op)
		ops[op.Path] = op.Value
	}
	assert.Equal(t, map[string]any{
		"/spec/strategy":        "RollingUpdate",
		"/metadata/labels":      map[string]any{"app.kubernetes.io/managed-by": "elide-operator"},
		"/metadata/annotations": map[string]any{"elide.dev/webhook-mutated": "true"},
	}, ops)
	md := req.Object["metadata"].(map[string]any)
	assert.Equal(t, "elide-operator", md["labels"].(map[string]any)["app.kubernetes.io/managed-by"], "the patch is applied")
	assert.Equal(t, "RollingUpdate", req.Object["spec"].(map[string]any)["strategy"])

	again, err := c.Mutate(context.Background(), req)
	require.NoError(t, err)
	assert.Empty(t, again.Patch, "defaulting is idempotent")

	// Existing labels: the key is added with RFC 6901 escaping.
	req = appRequest(webhooks.Create, map[string]any{"replicas": json.Number("1"), "image": "x", "strategy": "Recreate"})
	req.Object["metadata"].(map[string]any)["labels"] = map[string]any{"tier": "web"}
	res, err = c.Mutate(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, res.Patch, 2)
	assert.Equal(t, "/metadata/labels/app.kubernetes.io~1managed-by", res.Patch[0].Path)
	assert.Equal(t, "Recreate", req.Object["spec"].(map[string]any)["strategy"], "a strategy is kept")

	// No metadata, no spec: no panic, everything added.
	req = appRequest(webhooks.Create, nil)
	delete(req.Object, "metadata")
	delete(req.Object, "spec")
	res, err = c.Mutate(context.Background(), req)
	require.NoError(t, err)
	assert.Len(t, res.Patch, 2)
}

func TestValidator(t *testing.T) {
	t.Parallel()
	c := chain(t, nil)
	limits := map[string]any{"limits": map[string]any{"cpu": "1"}}
	tests := []struct {
		name     string
		spec     map[string]any
		allowed  bool
		message  string
		warnings int
	}{
		{"the README's review", map[string]any{"replicas": json.Number("3"), "image": "nginx:latest"}, true, "", 2},
		{"pinned with limits", map[string]any{"replicas": json.Number("3"), "image": "nginx:1.27", "resources": limits}, true, "", 0},
		{"no tag", map[string]any{"replicas": json.Number("3"), "image": "nginx", "resources": limits}, true, "", 1},
		{"digest", map[string]any{"replicas": json.Number("3"), "image": "nginx@sha256:" + strings.Repeat("a", 64), "resources": limits}, true, "", 0},
		{"registry port is not a tag", map[string]any{"replicas": json.Number("3"), "image": "gcr.io:443/x/app:1", "resources": limits}, false, "Registry 'gcr.io:443' is not allowed", 0},
		{"too many replicas", map[string]any{"replicas": json.Number("150"), "image": "nginx:1"}, false, "replicas must be <= 100 (use HPA for higher scale)", 0},
		{"negative replicas", map[string]any{"replicas": float64(-1), "image": "nginx:1"}, false, "replicas must be >= 0", 0},
		{"missing replicas", map[string]any{"image": "nginx:1"}, false, "replicas is required", 0},
		{"missing image", map[string]any{"replicas": json.Number("1")}, false, "image is required", 0},
		{"blocked image", map[string]any{"replicas": int64(1), "image": "ubuntu:22.04"}, false, "Base image 'ubuntu' is not allowed. Use distroless or specific application images.", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := c.Validate(context.Background(), appRequest(webhooks.Create, tt.spec))
			assert.Equal(t, tt.allowed, res.Allowed)
			if !tt.allowed {
				require.NotNil(t, res.Result)
				assert.EqualValues(t, 403, res.Result.Code)
				assert.Equal(t, metav1.StatusReasonForbidden, res.Result.Reason)
				assert.Contains(t, res.Result.Message, tt.message)
				return
			}
			assert.Len(t, res.Warnings, tt.warnings, "warnings: %v", res.Warnings)
		})
	}
}

func TestImagePolicy(t *testing.T) {
	t.Parallel()
	digest := "@sha256:" + strings.Repeat("0", 64)
	tests := []struct {
		name              string
		registries, block []string
		image             string
		allowed           bool
		message           string
	}{
		{"nginx:latest", []string{"docker.io", "gcr.io"}, []string{"ubuntu", "alpine"}, "nginx:latest", true, ""},
		{"distroless on gcr", []string{"docker.io", "gcr.io"}, []string{"ubuntu", "alpine"}, "gcr.io/distroless/base-debian12", true, ""},
		{"ubuntu tag", []string{"docker.io"}, []string{"ubuntu"}, "ubuntu:22.04", false, "Base image 'ubuntu' is not allowed"},
		{"alpine by digest", []string{"docker.io"}, []string{"alpine"}, "docker.io/library/alpine" + digest, false, "Base image 'alpine' is not allowed"},
		{"alpine fully qualified entry", []string{"docker.io"}, []string{"docker.io/library/alpine"}, "alpine:3.20", false, "Base image 'docker.io/library/alpine' is not allowed"},
		{"another repository named ubuntu", []string{"docker.io"}, []string{"ubuntu"}, "myorg/ubuntu:1", true, ""},
		{"registry not allowed", []string{"docker.io", "gcr.io"}, nil, "quay.io/org/app:1", false, "Registry 'quay.io' is not allowed. Allowed registries: docker.io, gcr.io"},
		{"any registry when empty", nil, nil, "quay.io/org/app:1", true, ""},
		{"nothing blocked when empty", nil, nil, "alpine", true, ""},
		{"invalid reference", nil, nil, "UPPER/Case", false, "invalid image reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := application.NewImagePolicy(tt.registries, tt.block)
			require.NoError(t, err)
			res := p.Check(tt.image)
			assert.Equal(t, tt.allowed, res.Allowed)
			if !tt.allowed {
				assert.Contains(t, res.Result.Message, tt.message)
			}
		})
	}
	_, err := application.NewImagePolicy(nil, []string{"Not A Reference"})
	require.Error(t, err)
}

type webhookRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *webhookRecorder) ObserveWebhook(webhook, operation string, allowed bool, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, webhook+"/"+operation+"/"+map[bool]string{true: "allowed", false: "denied"}[allowed])
}

func TestChain(t *testing.T) {
	t.Parallel()
	rec := &webhookRecorder{}
	c := chain(t, rec)
	res := c.Validate(context.Background(), appRequest(webhooks.Update, map[string]any{"replicas": json.Number("1"), "image": "alpine:3"}))
	assert.False(t, res.Allowed)
	assert.Equal(t, []string{"validator/UPDATE/allowed", "security-policy/UPDATE/denied"}, rec.calls)

	// Other resources, operations and the status subresource are not judged.
	for _, req := range []*webhooks.Request{
		func() *webhooks.Request { r := appRequest(webhooks.Delete, nil); return r }(),
		func() *webhooks.Request { r := appRequest(webhooks.Create, nil); r.SubResource = "status"; return r }(),
		func() *webhooks.Request {
			r := appRequest(webhooks.Create, nil)
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
			return r
		}(),
	} {
		assert.True(t, c.Validate(context.Background(), req).Allowed)
		m, err := c.Mutate(context.Background(), req)
		require.NoError(t, err)
		assert.Empty(t, m.Patch)
	}

	// The first denial wins and stops the chain; warnings gather.
	deny := &webhooks.Chain{Validating: []webhooks.Named{
		{Name: "warn", Handler: webhooks.HandlerFunc(func(context.Context, *webhooks.Request) webhooks.Response { return webhooks.Allowed("w1") })},
		{Name: "deny", Handler: webhooks.HandlerFunc(func(context.Context, *webhooks.Request) webhooks.Response { return webhooks.Denied("no") })},
		{Name: "never", Handler: webhooks.HandlerFunc(func(context.Context, *webhooks.Request) webhooks.Response { panic("not reached") })},
	}}
	res = deny.Validate(context.Background(), appRequest(webhooks.Create, nil))
	assert.False(t, res.Allowed)
	assert.Equal(t, []string{"w1"}, res.Warnings)
	assert.Equal(t, "no", res.Result.Message)
}

const readmeReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"test-123",
 "kind":{"group":"cloudnative.elide.dev","version":"v1","kind":"Application"},
 "resource":{"group":"cloudnative.elide.dev","version":"v1","resource":"applications"},
 "operation":"CREATE","userInfo":{"username":"admin"},
 "object":{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"test"},"spec":{"replicas":3,"image":"nginx:latest"}}}}`

func TestReviewGolden(t *testing.T) {
	t.Parallel()
	c := chain(t, nil)
	tests := []struct {
		name     string
		body     string
		mutating bool
	}{
		{"validate-readme", readmeReview, false},
		{"mutate-readme", readmeReview, true},
		{"validate-denied", strings.Replace(readmeReview, "nginx:latest", "ubuntu:22.04", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := webhooks.Review(context.Background(), c, []byte(tt.body), tt.mutating)
			require.NoError(t, err)
			var pretty map[string]any
			require.NoError(t, json.Unmarshal(out, &pretty))
			got, _ := json.MarshalIndent(pretty, "", "  ")
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, append(got, '\n'), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./webhooks -update to create it")
			assert.JSONEq(t, string(want), string(got))
		})
	}
}

func TestReviewRejectsMalformed(t *testing.T) {
	t.Parallel()
	c := chain(t, nil)
	for _, body := range []string{
		``, `{`, `[]`, `null`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE","object":[1]}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE"}}`,
	} {
		_, err := webhooks.Review(context.Background(), c, []byte(body), false)
		requireBadRequest(t, err, body)
	}
}

func requireBadRequest(t *testing.T, err error, input string) {
	t.Helper()
	var se *apierrors.StatusError
	require.True(t, errors.As(err, &se), "input %q: want a StatusError, got %v", input, err)
	require.EqualValues(t, 400, se.ErrStatus.Code, "input %q", input)
}

func FuzzReview(f *testing.F) {
	f.Add([]byte(readmeReview), true) // the README's review; the other seeds are in testdata/fuzz/FuzzReview
	c, err := application.NewChain(application.ChainConfig{AllowedRegistries: []string{"docker.io"}, BlockedImages: []string{"alpine"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, mutating bool) {
		out, err := webhooks.Review(context.Background(), c, body, mutating)
		if err != nil {
			requireBadRequest(t, err, string(body))
			return
		}
		var resp map[string]any
		require.NoError(t, json.Unmarshal(out, &resp), "the answer is JSON")
	})
}

func FuzzImagePolicy(f *testing.F) {
	p, err := application.NewImagePolicy([]string{"docker.io", "gcr.io"}, []string{"ubuntu", "alpine"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, image string) {
		res := p.Check(image)
		if !res.Allowed && (res.Result == nil || res.Result.Code != 403) {
			t.Fatalf("a denial must be a 403 with a message: %+v", res)
		}
	})
}

// TestImagePolicyRemembersVerdicts: verdicts stay right when they come from the policy's
// memory, also past the point where it is cleared.
func TestImagePolicyRemembersVerdicts(t *testing.T) {
	p, err := application.NewImagePolicy([]string{"docker.io"}, []string{"ubuntu"})
	require.NoError(t, err)
	for round := range 2 {
		for i := range 5000 {
			require.True(t, p.Check(fmt.Sprintf("nginx:1.%d", i)).Allowed, "round %d image %d", round, i)
		}
		res := p.Check("ubuntu:22.04")
		require.False(t, res.Allowed)
		assert.Contains(t, res.Result.Message, "Base image 'ubuntu' is not allowed")
		assert.False(t, p.Check("quay.io/x/y:1").Allowed)
	}
}

// FuzzDefaulterInPlace: whatever the object, the write path's in-place defaulting
// (Chain.Apply) leaves it exactly as applying the defaulter's patch does (Chain.Mutate).
func FuzzDefaulterInPlace(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"name":"a"},"spec":{"image":"nginx","replicas":1}}`,
		`{"metadata":{"name":"a","labels":{"app.kubernetes.io/managed-by":"someone"},"annotations":"x"},"spec":{"strategy":""}}`,
		`{"metadata":{"labels":null},"spec":null}`,
		`{"metadata":"x","spec":"y"}`,
		`{}`,
		`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"elide-operator"},"annotations":{"elide.dev/webhook-mutated":"true"}},"spec":{"strategy":"Recreate"}}`,
	} {
		f.Add(seed)
	}
	chain, err := application.NewChain(application.ChainConfig{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		decode := func() map[string]any {
			d := json.NewDecoder(strings.NewReader(src))
			d.UseNumber()
			var obj map[string]any
			if d.Decode(&obj) != nil || obj == nil {
				return nil
			}
			return obj
		}
		patched, inPlace := decode(), decode()
		if patched == nil {
			return
		}
		req := func(obj map[string]any) *webhooks.Request {
			return &webhooks.Request{Operation: webhooks.Create, Object: obj,
				Resource: metav1.GroupVersionResource{Group: "cloudnative.elide.dev", Version: "v1", Resource: "applications"}}
		}
		r1, r2 := req(patched), req(inPlace)
		res1, err1 := chain.Mutate(context.Background(), r1)
		res2, err2 := chain.Apply(context.Background(), r2)
		require.Equal(t, err1 == nil, err2 == nil, "%v / %v", err1, err2)
		assert.Equal(t, res1.Allowed, res2.Allowed)
		assert.Equal(t, r1.Object, r2.Object, "%s", src)
		assert.Empty(t, res2.Patch, "Apply returns no patch")
	})
}
