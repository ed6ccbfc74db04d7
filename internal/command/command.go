package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"k8s.io/klog/v2"

	opemu "github.com/opemu/opemu/app"
	"github.com/opemu/opemu/snapshot"
)

// Run is the opemu command without os.Exit: it reads args (without the program name) and the
// environment through lookupEnv, runs the server or a subcommand, and returns the process exit
// code (2 for invalid configuration). version is what GET / reports. The server runs until
// SIGINT or SIGTERM; a second signal exits the process at once.
func Run(version string, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "kubeconfig" {
		return runKubeconfig(args[1:], lookupEnv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "snapshot" {
		return runSnapshot(args[1:], lookupEnv, os.Stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "rbac" {
		return runRBAC(args[1:], lookupEnv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "etcd" {
		return runEtcd(args[1:], stdout, stderr)
	}
	cfg, err := load(args, lookupEnv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "opemu: %v\n", err)
		return 2
	}
	runtime.MemProfileRate = heapProfileRate(cfg.PProf, lookupEnv)
	log := newLogger(cfg, stderr)
	klog.SetSlogLogger(log) // client-go's elector logs through the same handler

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done) // before wg.Wait: ends exitOnSecondSignal
	wg.Go(func() { exitOnSecondSignal(ctx, done, stop, log) })

	cfg.Logger, cfg.Version = log, version
	// Start-up leaves a few MiB of garbage (package initialisation, the first compiles); hand
	// it back before serving so idle RSS reflects what is in use (SPEC §10).
	cfg.Ready = debug.FreeOSMemory
	if err := opemu.Run(ctx, cfg.Config); err != nil {
		log.Error("opemu stopped", "err", err)
		return 1
	}
	return 0
}

// heapProfileRate is the runtime.MemProfileRate the server runs with: GODEBUG's memprofilerate
// when set; else, with /debug/pprof served, the runtime's default (one sample per 512 KiB);
// else 0. Nothing can read a heap profile without /debug/pprof, and each sample walks the
// allocating stack, which maps the pages of the function table it reads: about 0.5 MiB of
// idle RSS once serving (package memprofile turns sampling off before initialisation).
func heapProfileRate(pprof bool, lookupEnv func(string) (string, bool)) int {
	godebug, _ := lookupEnv("GODEBUG")
	for _, kv := range strings.Split(godebug, ",") {
		if v, ok := strings.CutPrefix(kv, "memprofilerate="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	if pprof {
		return 512 * 1024
	}
	return 0
}

// exitOnSecondSignal exits the process at once on a second SIGINT or SIGTERM: once ctx is done
// (the first signal), it stops ctx's handling and waits for another. It returns when done is
// closed (Run is returning).
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

// Config is the server Run would serve with the settings of args and the environment read
// through lookupEnv: flags and variables parsed with the binary's defaults, tokens read and
// certificates made or loaded. Its Logger, Version and Ready are left for the caller. It is how a
// test runs in its own process the server the binary would run with the same settings.
func Config(args []string, lookupEnv func(string) (string, bool)) (opemu.Config, error) {
	c, err := load(args, lookupEnv, io.Discard)
	return c.Config, err
}

// load parses args and the environment (printing usage to out for --help, then returning
// flag.ErrHelp) and loads what the settings name; its errors are configuration errors.
func load(args []string, lookupEnv func(string) (string, bool), out io.Writer) (config, error) {
	c, err := parseConfig(args, lookupEnv, out)
	if err != nil {
		return c, err
	}
	c.MaxRetries = maxRetries(c.MaxRetries)
	if err := loadSnapshot(&c); err != nil {
		return c, err
	}
	return c, loadSecurity(&c)
}

// loadSnapshot reads LOAD's file into c's Load. The objects are checked when the server
// restores them (app.New).
func loadSnapshot(c *config) error {
	if c.LoadFile == "" {
		return nil
	}
	f, err := os.Open(c.LoadFile)
	if err != nil {
		return fmt.Errorf("invalid LOAD: %w", err)
	}
	defer f.Close()
	if c.Load, err = snapshot.Read(f); err != nil {
		return fmt.Errorf("invalid LOAD: %s: %w", c.LoadFile, err)
	}
	return nil
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
