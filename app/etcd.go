package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/etcd"
)

// openEtcd opens the etcd store of cfg: a client of cfg.EtcdEndpoints and the store over it,
// its watch cache configured as cc. While etcd does not answer it tries again, logging each
// failed try, until ctx ends. closeAll closes the store, then the client.
func openEtcd(ctx context.Context, cfg Config, cc cache.Config, identity string, log *slog.Logger) (sharedStore, func(), error) {
	endpoints := cfg.EtcdEndpoints
	if len(endpoints) == 0 {
		endpoints = []string{"http://127.0.0.1:2379"}
	}
	client, err := etcd.NewClient(endpoints, cfg.EtcdTLS)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	for {
		s, err := etcd.New(etcd.Config{Client: client, Prefix: cfg.EtcdPrefix, Identity: identity, Logger: log, Cache: cc})
		if err == nil {
			return s, func() { s.Close(); _ = client.Close() }, nil
		}
		if !errors.Is(err, etcd.ErrUnavailable) || ctx.Err() != nil {
			_ = client.Close()
			return nil, nil, err
		}
		log.Warn("waiting for etcd: /readyz answers 503 until it answers", "endpoints", endpoints, "err", err)
	}
}
