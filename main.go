// Command opemu emulates a Kubernetes-style API server in memory, with the operator pattern
// running inside it. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"k8s.io/klog/v2"

	opemu "github.com/opemu/opemu/app"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// run is main without os.Exit: it returns the process exit code (2 for invalid configuration).
func run(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "kubeconfig" {
		return runKubeconfig(args[1:], lookupEnv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "etcd" {
		return runEtcd(args[1:], stdout, stderr)
	}
	cfg, err := parseConfig(args, lookupEnv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "opemu: %v\n", err)
		return 2
	}
	if err := loadSecurity(&cfg); err != nil {
		fmt.Fprintf(stderr, "opemu: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	klog.SetSlogLogger(log) // client-go's elector logs through the same handler

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done) // before wg.Wait: ends exitOnSecondSignal
	wg.Go(func() { exitOnSecondSignal(ctx, done, stop, log) })

	cfg.Logger, cfg.Version, cfg.MaxRetries = log, version, maxRetries(cfg.MaxRetries)
	// Start-up leaves a few MiB of garbage (package initialisation, the first compiles); hand
	// it back before serving so idle RSS reflects what is in use (SPEC §10).
	cfg.Ready = debug.FreeOSMemory
	if err := opemu.Run(ctx, cfg.Config); err != nil {
		log.Error("opemu stopped", "err", err)
		return 1
	}
	return 0
}

// exitOnSecondSignal exits the process at once on a second SIGINT or SIGTERM: once ctx is done
// (the first signal), it stops ctx's handling and waits for another. It returns when done is
// closed (run is returning).
func exitOnSecondSignal(ctx context.Context, done <-chan struct{}, stop context.CancelFunc, log *slog.Logger) {
	select {
	case <-ctx.Done():
	case <-done:
		return
	}
	stop()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-sig:
		log.Warn("second signal: exiting now")
		os.Exit(1)
	case <-done:
	}
}

// maxRetries maps MAX_RETRIES (0 allowed: drop at the first failure) to app.Config.
func maxRetries(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
