package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/snapshot"
)

// Snapshot is an environment's whole state at one moment (package snapshot): its objects, with
// their uids, ownerReferences, finalizers and status, and its clock.
type Snapshot = snapshot.Snapshot

// snapshotTimeout bounds Snapshot and Restore, which do not wait on anything but the store.
const snapshotTimeout = 30 * time.Second

// Snapshot takes the environment's state (SPEC §23). It shares the stored objects' bytes, so it
// costs little more than a list of them; it may be restored into this environment or another
// (Restore), any number of times, or written to a file (snapshot.Write).
func (e *Environment) Snapshot() (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	return e.app.Snapshot(ctx)
}

// Restore replaces the environment's state with s's: every object is as it was in s (uids
// included); watches end with a 410 Expired, so informers list again and controllers requeue
// everything; resourceVersions keep moving forward. With a manual clock (Options.Server.Clock)
// the clock is set to s's time when s was taken on a manual clock too.
func (e *Environment) Restore(s *Snapshot) error {
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	_, err := e.app.Restore(ctx, s, snapshot.RestoreOptions{})
	return err
}

// Fork starts a new environment from env's state: the options env was started with (its CRDs
// and webhook configurations come with its objects, which already point at the suite's
// webhook server) and a snapshot of env, taken now. The two are independent from then on: a
// manual clock is the fork's own, set to env's time. Cheap enough to give every test its own
// copy of a large fixture (docs/PERFORMANCE.md). Stop it as any environment.
func Fork(env *Environment) (*Environment, error) {
	s, err := env.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("testenv: fork: %w", err)
	}
	opts := env.opts
	opts.CRDDirectoryPaths, opts.CRDs, opts.CRDInstallOptions = nil, nil, CRDInstallOptions{}
	opts.WebhookInstallOptions = WebhookInstallOptions{}
	opts.Server.Load = s
	if _, manual := opts.Server.Clock.(interface{ SetTime(time.Time) }); manual {
		opts.Server.Clock = app.NewManualClock(s.Clock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	fork, err := Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("testenv: fork: %w", err)
	}
	// What env installed, for the reader; the certificate directory stays env's to remove.
	fork.CRDs, fork.WebhookInstallOptions = env.CRDs, env.WebhookInstallOptions
	fork.WebhookInstallOptions.tempDir = ""
	return fork, nil
}

// NewFork is Fork for t: the fork stops when t and its subtests have completed (in
// t.Cleanup), and a fork that does not start or stop cleanly fails t.
func NewFork(t testing.TB, env *Environment) *Environment {
	t.Helper()
	fork, err := Fork(env)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := fork.Stop(); err != nil {
			t.Errorf("testenv: stop: %v", err)
		}
	})
	return fork
}
