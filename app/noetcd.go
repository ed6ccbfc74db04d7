//go:build !etcd

package app

import (
	"context"
	"log/slog"

	"github.com/opemu/opemu/cache"
)

// openEtcd is nil: this binary is built without etcd (see EtcdBuiltIn).
var openEtcd func(ctx context.Context, cfg Config, cc cache.Config, identity string, log *slog.Logger) (sharedStore, func(), error)
