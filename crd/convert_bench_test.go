package crd_test

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/require"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// convertingWebhook is a conversion webhook over HTTPS (HTTP/2, as a Go server offers it) that
// rewrites each object's apiVersion, as the least a real one does. It returns the CRD's
// conversion pointing at it.
func convertingWebhook(tb testing.TB) *apiextv1.CustomResourceConversion {
	tb.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review apiextv1.ConversionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not a ConversionReview", http.StatusBadRequest)
			return
		}
		out := make([]runtime.RawExtension, len(review.Request.Objects))
		for i, o := range review.Request.Objects {
			var obj map[string]any
			if err := json.Unmarshal(o.Raw, &obj); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			obj["apiVersion"] = review.Request.DesiredAPIVersion
			out[i].Raw, _ = json.Marshal(obj)
		}
		review.Response = &apiextv1.ConversionResponse{UID: review.Request.UID, ConvertedObjects: out, Result: metav1.Status{Status: metav1.StatusSuccess}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	url := srv.URL + "/convert"
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter, Webhook: &apiextv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"},
		ClientConfig:             &apiextv1.WebhookClientConfig{URL: &url, CABundle: ca},
	}}
}

// convertedWidgets registers the Widget CRD converted by a local webhook (convertingWebhook)
// and returns its v1beta1 kind, a view of the objects stored as v1.
func convertedWidgets(tb testing.TB) *kinds.Kind {
	tb.Helper()
	r, ks := newRegistry(tb)
	c := widgets(tb)
	c.Spec.Conversion = convertingWebhook(tb)
	_, errs, err := r.Register(c)
	require.NoError(tb, err)
	require.Empty(tb, errs)
	beta, ok := ks.Lookup("example.com", "v1beta1", "widgets")
	require.True(tb, ok)
	return beta
}

// BenchmarkConversionWebhook reads one stored v1 Widget as v1beta1, converted by a local
// conversion webhook: apiextensions-apiserver's webhook converter, the HTTPS round trip, and
// the pruning and defaulting of the answer (issue 26: under 2 ms at the median, p50-µs).
func BenchmarkConversionWebhook(b *testing.B) {
	beta := convertedWidgets(b)
	stored := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","uid":"6d1f0e6a-4b1e-4a51-9f0c-3c1a7e0b1f2a","resourceVersion":"7"},"spec":{"size":5}}`
	var took []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		obj := decode(b, stored)
		start := time.Now()
		out, err := beta.Conversion.FromStorage(obj)
		took = append(took, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if out["apiVersion"] != "example.com/v1beta1" {
			b.Fatalf("converted into %v", out["apiVersion"])
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
