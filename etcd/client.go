package etcd

import (
	"crypto/tls"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// NewClient returns an etcd client for endpoints (TLS when tlsConfig is set) that does not
// wait for a connection: calls fail with a bounded error while etcd is unreachable, and the
// client reconnects by itself. Its own logging is off (opemu reports what matters).
func NewClient(endpoints []string, tlsConfig *tls.Config) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		TLS:                  tlsConfig,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		// Let values larger than etcd takes reach etcd, so the answer is etcd's own "request is
		// too large" (a 413), not a client-side refusal.
		MaxCallSendMsgSize: 16 << 20,
		MaxCallRecvMsgSize: 256 << 20,
		Logger:             zap.NewNop(),
	})
}
