package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/opemu/opemu/webhooks"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// maxReviewBytes bounds a webhook's answer.
const maxReviewBytes = 3 << 20

// spec is one webhook of a configuration, mutating or validating alike.
type spec struct {
	name                              string
	clientConfig                      admissionregistrationv1.WebhookClientConfig
	rules                             []admissionregistrationv1.RuleWithOperations
	failurePolicy                     *admissionregistrationv1.FailurePolicyType
	matchPolicy                       *admissionregistrationv1.MatchPolicyType
	namespaceSelector, objectSelector *metav1.LabelSelector
	sideEffects                       *admissionregistrationv1.SideEffectClass
	timeoutSeconds                    *int32
	reviewVersions                    []string
}

// webhook is one configured admission webhook: a webhooks.Handler that sends AdmissionReview v1
// to its URL, with the rules and selectors that say which requests it judges.
type webhook struct {
	a        *Admission
	name     string
	config   string // the configuration's name, for logs
	mutating bool
	rules    []admissionregistrationv1.RuleWithOperations
	// fail is failurePolicy Fail (the default): a call that fails refuses the request.
	fail bool
	// exact is matchPolicy Exact: only the versions the rules name match.
	exact         bool
	nsSel, objSel labels.Selector
	// dryRunSafe is sideEffects None or NoneOnDryRun: the webhook may be called on dry runs.
	dryRunSafe bool
	timeout    time.Duration
	url        string
	client     *http.Client
	// invalid, when set, is why the webhook cannot be called (a service reference, a bad URL or
	// caBundle, no v1 among its AdmissionReview versions): every call fails with it, and its
	// failurePolicy decides.
	invalid error
}

var _ webhooks.Handler = (*webhook)(nil)

func (a *Admission) newWebhook(config string, mutating bool, s spec) *webhook {
	w := &webhook{
		a: a, name: s.name, config: config, mutating: mutating, rules: s.rules,
		fail:    s.failurePolicy == nil || *s.failurePolicy != admissionregistrationv1.Ignore,
		exact:   s.matchPolicy != nil && *s.matchPolicy == admissionregistrationv1.Exact,
		timeout: 10 * time.Second,
		nsSel:   labels.Everything(), objSel: labels.Everything(),
	}
	if s.sideEffects != nil {
		se := *s.sideEffects
		w.dryRunSafe = se == admissionregistrationv1.SideEffectClassNone || se == admissionregistrationv1.SideEffectClassNoneOnDryRun
	}
	if s.timeoutSeconds != nil && *s.timeoutSeconds > 0 {
		w.timeout = time.Duration(*s.timeoutSeconds) * time.Second
	}
	var err error
	if s.namespaceSelector != nil {
		if w.nsSel, err = metav1.LabelSelectorAsSelector(s.namespaceSelector); err != nil {
			w.nsSel, w.invalid = labels.Everything(), fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	if s.objectSelector != nil {
		if w.objSel, err = metav1.LabelSelectorAsSelector(s.objectSelector); err != nil {
			w.objSel, w.invalid = labels.Everything(), fmt.Errorf("objectSelector: %w", err)
		}
	}
	if len(s.reviewVersions) > 0 && !contains(s.reviewVersions, "v1") {
		w.invalid = fmt.Errorf("admissionReviewVersions %v does not include v1, the only version opemu sends", s.reviewVersions)
	}
	if w.url, w.client, err = clientFor(s.clientConfig); err != nil && w.invalid == nil {
		w.invalid = err
	}
	return w
}

// cleanPath is the path kube-apiserver's REST client requests for a webhook URL's path: joined
// clean (envtest's WebhookInstallOptions write "https://host:port/" + "/mutate-...", whose "//"
// a Go ServeMux would answer with a redirect), its trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return p
	}
	out := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && out != "/" {
		out += "/"
	}
	return out
}

// clientFor returns the URL and HTTP client of a webhook's clientConfig. Services cannot be
// resolved (opemu runs no Services); an http URL is allowed, unlike in kube-apiserver, so a
// webhook can be tried without certificates.
func clientFor(cc admissionregistrationv1.WebhookClientConfig) (string, *http.Client, error) {
	if cc.Service != nil {
		return "", nil, fmt.Errorf("clientConfig.service %s/%s cannot be reached: opemu runs no Services; give clientConfig.url instead (e.g. https://127.0.0.1:9443/mutate)",
			cc.Service.Namespace, cc.Service.Name)
	}
	if cc.URL == nil || *cc.URL == "" {
		return "", nil, errors.New("clientConfig has no url")
	}
	u, err := url.Parse(*cc.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", nil, fmt.Errorf("clientConfig.url %q is not an http or https URL", *cc.URL)
	}
	u.Path = cleanPath(u.Path)
	u.RawPath = ""
	c, err := newClient(cc.CABundle, 8)
	if err != nil {
		return "", nil, fmt.Errorf("clientConfig.caBundle %w", err)
	}
	return u.String(), c, nil
}

// close drops the webhook's idle connections once it is replaced.
func (w *webhook) close() {
	if w.client != nil {
		w.client.CloseIdleConnections()
	}
}

// Handle judges req by calling the webhook. A dry run is refused before any call when the
// webhook may have side effects (sideEffects Unknown or Some), as kube-apiserver does. A call
// that fails (unreachable, timed out, a non-2xx answer, an answer that is not a valid
// AdmissionReview for this request) refuses the request with a 500 under failurePolicy Fail
// and lets it through under Ignore.
func (w *webhook) Handle(ctx context.Context, req *webhooks.Request) webhooks.Response {
	if req.DryRun && !w.dryRunSafe {
		return refuse(apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", w.name)))
	}
	res, err := w.call(ctx, req)
	if err == nil {
		return res
	}
	err = fmt.Errorf("failed calling webhook %q: %w", w.name, err)
	if !w.fail {
		w.a.log.Warn("admission webhook failed; failurePolicy Ignore lets the request through",
			"configuration", w.config, "webhook", w.name, "operation", req.Operation, "resource", req.Resource.Resource, "name", req.Name, "err", err)
		return webhooks.Allowed()
	}
	return refuse(apierrors.NewInternalError(err))
}

// refuse is a Response that refuses with err's Status.
func refuse(err *apierrors.StatusError) webhooks.Response {
	st := err.ErrStatus
	return webhooks.Response{Result: &st}
}

// call sends req as an AdmissionReview and reads the answer.
func (w *webhook) call(ctx context.Context, req *webhooks.Request) (webhooks.Response, error) {
	if w.invalid != nil {
		return webhooks.Response{}, w.invalid
	}
	ar, view, err := w.review(req)
	if err != nil {
		return webhooks.Response{}, err
	}
	body, err := json.Marshal(ar)
	if err != nil {
		return webhooks.Response{}, err
	}
	raw, err := w.callee().post(ctx, body)
	if err != nil {
		return webhooks.Response{}, fmt.Errorf("failed to call webhook: %w", err)
	}
	res, err := w.answer(raw, ar.Request.UID)
	if err != nil || view == nil || len(res.Patch) == 0 {
		return res, err
	}
	if res.Patch, err = view.patchBack(res.Patch); err != nil {
		return webhooks.Response{}, err
	}
	return res, nil
}

// callee is the webhook as post calls it: its URL with kube-apiserver's timeout parameter.
func (w *webhook) callee() callee {
	return callee{
		what: "the webhook", url: w.urlWithTimeout(), client: w.client, timeout: w.timeout, timeoutField: "timeoutSeconds",
		limit: maxReviewBytes, log: w.a.log, logAttrs: []any{"webhook", w.name, "configuration", w.config},
	}
}

// answer reads a webhook's AdmissionReview answer to the request uid: a denial (worded as
// kube-apiserver words it), or an admission with its warnings and, from a mutating webhook, its
// JSON Patch. An answer that is not a valid AdmissionReview for uid is an error (a failed call).
func (w *webhook) answer(raw []byte, uid types.UID) (webhooks.Response, error) {
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &out); err != nil {
		return webhooks.Response{}, fmt.Errorf("the answer is not an AdmissionReview: %w", w.callee().undecodable(raw, err))
	}
	switch {
	case out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview":
		return webhooks.Response{}, errors.New("the answer is not an admission.k8s.io/v1 AdmissionReview (apiVersion or kind differ)")
	case out.Response == nil:
		return webhooks.Response{}, errors.New("the AdmissionReview has no response")
	case out.Response.UID != uid:
		return webhooks.Response{}, fmt.Errorf("expected response.uid %q, got another", uid)
	}
	r := out.Response
	if !r.Allowed {
		return webhooks.Response{Result: denial(w.name, r.Result), Warnings: r.Warnings}, nil
	}
	res := webhooks.Response{Allowed: true, Warnings: r.Warnings}
	if !w.mutating || len(r.Patch) == 0 {
		return res, nil
	}
	if r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
		return webhooks.Response{}, errors.New("a patch needs patchType JSONPatch")
	}
	var err error
	if res.Patch, err = decodePatch(r.Patch); err != nil {
		return webhooks.Response{}, fmt.Errorf("the patch is not a JSON Patch: %v", err)
	}
	return res, nil
}

// urlWithTimeout adds kube-apiserver's timeout parameter to the webhook's URL.
func (w *webhook) urlWithTimeout() string {
	u, err := url.Parse(w.url)
	if err != nil {
		return w.url
	}
	q := u.Query()
	q.Set("timeout", strconv.Itoa(int(w.timeout/time.Second))+"s")
	u.RawQuery = q.Encode()
	return u.String()
}

// review builds the AdmissionReview of req: in the version the rules matched (matchPolicy
// Equivalent may pick another served version of the resource, whose objects differ only in
// apiVersion), and for /scale with the autoscaling/v1 Scale views of the objects.
func (w *webhook) review(req *webhooks.Request) (*admissionv1.AdmissionReview, *scaleView, error) {
	gvk, gvr, ok := w.matchResource(req)
	if !ok {
		return nil, nil, errors.New("the request no longer matches the webhook's rules")
	}
	obj, old := req.Object, req.OldObject
	var view *scaleView
	switch {
	case req.SubResource == "scale":
		k, ok := w.a.cfg.Kinds.Lookup(gvr.Group, gvr.Version, gvr.Resource)
		if !ok || k.Scale == nil {
			return nil, nil, fmt.Errorf("%s has no scale subresource", gvr.Resource)
		}
		view = &scaleView{kind: k, obj: obj}
		obj, old = scaleOf(k, obj), scaleOf(k, old)
		gvk = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	case gvk.Version != req.Kind.Version:
		obj, old = withAPIVersion(obj, gvk), withAPIVersion(old, gvk)
	}
	dry := req.DryRun
	reqKind, reqResource := req.Kind, req.Resource
	if req.SubResource == "scale" {
		reqKind = gvk
	}
	ar := &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(uuid.NewString()), Kind: gvk, Resource: gvr, SubResource: req.SubResource,
			RequestKind: &reqKind, RequestResource: &reqResource, RequestSubResource: req.SubResource,
			Name: req.Name, Namespace: req.Namespace, Operation: admissionv1.Operation(req.Operation),
			UserInfo: req.UserInfo, DryRun: &dry,
		},
	}
	var err error
	if ar.Request.Object, err = rawOf(obj); err != nil {
		return nil, nil, err
	}
	if ar.Request.OldObject, err = rawOf(old); err != nil {
		return nil, nil, err
	}
	if ar.Request.Options, err = rawOf(req.Options); err != nil {
		return nil, nil, err
	}
	return ar, view, nil
}

func rawOf(m map[string]any) (runtime.RawExtension, error) {
	if m == nil {
		return runtime.RawExtension{}, nil
	}
	raw, err := json.Marshal(m)
	return runtime.RawExtension{Raw: raw}, err
}

// withAPIVersion is a shallow copy of obj in gvk's version (a CRD's versions convert with
// strategy None: only apiVersion changes).
func withAPIVersion(obj map[string]any, gvk metav1.GroupVersionKind) map[string]any {
	if obj == nil {
		return nil
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	out["apiVersion"] = gvk.Group + "/" + gvk.Version
	if gvk.Group == "" {
		out["apiVersion"] = gvk.Version
	}
	return out
}

// denial is the Status of a webhook's refusal, worded as kube-apiserver words it: the
// webhook's name, then its message (or reason); a code below 400 becomes 403.
func denial(name string, st *metav1.Status) *metav1.Status {
	out := metav1.Status{}
	if st != nil {
		out = *st
	}
	out.Status = metav1.StatusFailure
	if out.Code < http.StatusBadRequest {
		out.Code = http.StatusForbidden
	}
	by := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case out.Message != "":
		out.Message = by + ": " + out.Message
	case out.Reason != "":
		out.Message = by + ": " + string(out.Reason)
	default:
		out.Message = by + " without explanation"
	}
	if out.Reason == "" && out.Code == http.StatusForbidden {
		out.Reason = metav1.StatusReasonForbidden
	}
	return &out
}

// decodePatch decodes a JSON Patch with numbers as json.Number, as the chain applies them.
func decodePatch(raw []byte) ([]webhooks.PatchOperation, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var ops []webhooks.PatchOperation
	if err := dec.Decode(&ops); err != nil {
		return nil, err
	}
	for _, op := range ops {
		switch op.Op {
		case "add", "remove", "replace", "move", "copy", "test":
		default:
			return nil, fmt.Errorf("unknown operation %q", op.Op)
		}
	}
	return ops, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
