package integration

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/opemu/opemu/test/internal/request"
)

// conversionWebhook serves ConversionReviews over HTTPS: /ok rewrites each object's
// apiVersion; the other paths fail as a broken webhook does. It returns its URL and CA.
func conversionWebhook(t *testing.T) (string, []byte) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			http.Error(w, "boom "+secretAnswer, http.StatusInternalServerError)
			return
		case "/text":
			_, _ = w.Write([]byte(secretAnswer))
			return
		case "/large": // JSON, 3 MiB and more
			_, _ = w.Write([]byte(`{"kind":"ConversionReview","s":"` + strings.Repeat(secretAnswer, 3<<20/len(secretAnswer)+1) + `"}`))
			return
		case "/json": // another service's JSON, which kube's decoder would quote the kind of
			_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"` + secretAnswer + `"}`))
			return
		}
		var review apiextv1.ConversionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not a ConversionReview", http.StatusBadRequest)
			return
		}
		out := make([]runtime.RawExtension, len(review.Request.Objects))
		for i, o := range review.Request.Objects {
			var obj map[string]any
			_ = json.Unmarshal(o.Raw, &obj)
			obj["apiVersion"] = review.Request.DesiredAPIVersion
			if r.URL.Path == "/renamed" {
				obj["metadata"].(map[string]any)["name"] = "other"
			}
			out[i].Raw, _ = json.Marshal(obj)
		}
		resp := &apiextv1.ConversionResponse{UID: review.Request.UID, ConvertedObjects: out, Result: metav1.Status{Status: metav1.StatusSuccess}}
		switch r.URL.Path {
		case "/baduid":
			resp.UID = "wrong"
		case "/failed":
			resp.Result, resp.ConvertedObjects = metav1.Status{Status: metav1.StatusFailure, Message: "no way"}, nil
		case "/fewer":
			resp.ConvertedObjects = nil
		}
		review.Request, review.Response = nil, resp
		_ = json.NewEncoder(w).Encode(&review)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// secretAnswer is what a local service might answer: no report of a failed call may quote it.
const secretAnswer = "root:x:0:0:root:/root:/bin/bash token=s3cr3t"

// closedURL is an https URL at a port of 127.0.0.1 that nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "https://" + addr
}

var uidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
var revisionRE = regexp.MustCompile(`revision=\d+`)

// TestConversionWebhookFailures: a conversion webhook that fails (an HTTP 500, another uid, a
// Failure result, too few objects, an object renamed) fails a get, a list and a create of the
// version it converts into with kube-apiserver's Status, word for word (recorded from
// kube-apiserver v1.37.2 with the same webhook), except that what the other end said and how
// the connection failed are never quoted (a closed port, a 500's body, a 200 that is not a
// ConversionReview, JSON of another kind, over 3 MiB: see
// README, Outgoing calls).
func TestConversionWebhookFailures(t *testing.T) {
	t.Parallel()
	s := start(t, "ENABLE_CONTROLLER=false")
	url, ca := conversionWebhook(t)
	corrupt := func(key, plural, cause string) string {
		return "StorageError: corrupt object, Code: 7, Key: " + key + "/wh.example.com/" + plural + "/default/a, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=N: conversion webhook for wh.example.com/v1, Kind=" + cause
	}
	closed := closedURL(t)
	tests := []struct{ path, cause, createCause, url string }{
		{"500", `failed: an error on the server ("") has prevented the request from succeeding`, "", ""},
		{"text", `failed: Post "URL/text?timeout=30s": the answer is not a ConversionReview (opemu's log has it)`, "", ""},
		{"json", `failed: Post "URL/json?timeout=30s": the answer is not a ConversionReview (opemu's log has it)`, "", ""},
		{"large", `failed: Post "URL/large?timeout=30s": the answer is larger than 3145728 bytes`, "", ""},
		{"closed", `failed: Post "URL/closed?timeout=30s": no answer (opemu's log has the cause)`, "", closed},
		{"baduid", `failed: expected response.uid="UID", got "wrong"`, "", ""},
		{"failed", "failed: no way", "", ""},
		{"fewer", "returned 0 objects, expected 1", "", ""},
		{"renamed", "returned invalid object: must have the same name: a != other", "returned invalid object: must have the same name: b != other", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			plural, kind := "hk"+tt.path, "Hk"+tt.path
			hook := url
			if tt.url != "" {
				hook = tt.url
			}
			code, body := request.JSON(t, "POST", s.url("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"), request.Body(t, map[string]any{
				"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": plural + ".wh.example.com"},
				"spec": map[string]any{
					"group": "wh.example.com", "scope": "Namespaced", "names": map[string]any{"plural": plural, "kind": kind},
					"conversion": map[string]any{"strategy": "Webhook", "webhook": map[string]any{"conversionReviewVersions": []string{"v1"},
						"clientConfig": map[string]any{"url": hook + "/" + tt.path, "caBundle": base64.StdEncoding.EncodeToString(ca)}}},
					"versions": []any{
						map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
						map[string]any{"name": "v2", "served": true, "storage": false, "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
					},
				},
			}))
			require.Equal(t, http.StatusCreated, code, body)
			base := s.url("/apis/wh.example.com/")
			code, body = request.JSON(t, "POST", base+"v1/namespaces/default/"+plural, `{"apiVersion":"wh.example.com/v1","kind":"`+kind+`","metadata":{"name":"a"},"spec":{"n":1}}`)
			require.Equal(t, http.StatusCreated, code, "the storage version needs no conversion: %v", body)
			cause := kind + " " + tt.cause
			norm := func(s any) string {
				msg := s.(string)
				assert.NotContains(t, msg, "s3cr3t")
				assert.NotContains(t, msg, "refused")
				return strings.ReplaceAll(revisionRE.ReplaceAllString(uidRE.ReplaceAllString(msg, "UID"), "revision=N"), hook, "URL")
			}

			code, body = request.JSON(t, "GET", base+"v2/namespaces/default/"+plural+"/a", "")
			assert.Equal(t, http.StatusInternalServerError, code)
			assert.Equal(t, "InternalError", body["reason"])
			assert.Equal(t, "Internal error occurred: "+corrupt("", plural, cause), norm(body["message"]))

			code, body = request.JSON(t, "GET", base+"v2/namespaces/default/"+plural, "")
			assert.Equal(t, http.StatusInternalServerError, code)
			assert.Equal(t, "StorageReadError", body["reason"])
			assert.Equal(t, "failed to read one or more "+plural+".wh.example.com from the storage: "+corrupt("/registry", plural, cause), norm(body["message"]))
			assert.Equal(t, map[string]any{"group": "wh.example.com", "kind": plural, "name": "list", "causes": []any{map[string]any{
				"reason": "UnexpectedServerResponse", "field": "/registry/wh.example.com/" + plural + "/default/a", "message": body["details"].(map[string]any)["causes"].([]any)[0].(map[string]any)["message"],
			}}}, body["details"])

			code, body = request.JSON(t, "POST", base+"v2/namespaces/default/"+plural, `{"apiVersion":"wh.example.com/v2","kind":"`+kind+`","metadata":{"name":"b"},"spec":{"n":2}}`)
			assert.Equal(t, http.StatusInternalServerError, code)
			assert.Nil(t, body["reason"])
			want := tt.createCause
			if want == "" {
				want = tt.cause
			}
			assert.Equal(t, "conversion webhook for wh.example.com/v2, Kind="+kind+" "+want, norm(body["message"]))
		})
	}
}
