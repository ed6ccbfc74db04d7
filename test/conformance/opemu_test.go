package conformance_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/server"
	"github.com/opemu/opemu/test/conformance"
)

// The opemu the corpus is replayed against: a lone API server as the oracle is (no controllers,
// no garbage collector), with the oracle's admin token, and no image policy (a cluster has
// none).

// oracleToken and oracleUser are the oracle's token file's admin (../shared/oracle/start.sh).
const oracleToken = "kas-admin-token"

var oracleUser = server.User{Name: "admin", UID: "admin-uid", Groups: []string{"system:masters"}}

// startOpemu serves opemu with store (memory or etcd) and authorization mode ("" or "RBAC")
// until t ends and returns it as a target.
func startOpemu(t *testing.T, store, authorization string) *conformance.Target {
	t.Helper()
	warmApplySchema(t)
	var url string
	if store == app.StoreMemory {
		url = startInProcess(t, app.Config{AuthorizationMode: authorization})
	} else {
		e := etcdtest.Start(t)
		url = startInProcess(t, app.Config{Store: app.StoreEtcd, EtcdEndpoints: []string{e.Endpoint}, AuthorizationMode: authorization})
	}
	return &conformance.Target{URL: url, Token: oracleToken}
}

// startInProcess runs app with cfg on a free loopback port until t ends.
func startInProcess(t *testing.T, cfg app.Config) string {
	t.Helper()
	tokens := server.NewTokens()
	require.NoError(t, tokens.Add(oracleToken, oracleUser))
	cfg.Tokens = tokens
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	a, err := app.New(t.Context(), cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("opemu did not stop within 10s")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("opemu stopped while starting: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("opemu did not start within 30s")
	}
	return "http://" + ln.Addr().String()
}

// warmApplySchema parses, before any case runs, the structured-merge-diff schema of the built-in
// kinds that server-side apply needs. opemu parses it on the first apply in a process (0.5 s, a
// one-time cost it keeps off its start), which under -race on a loaded machine can pass the
// 5 s request deadline and turn the first apply case into a 504. The parser is client-go's, one
// per process, so this warms every in-process server of the test.
func warmApplySchema(t *testing.T) {
	t.Helper()
	tc := applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
	_, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}})
	require.NoError(t, err)
}
