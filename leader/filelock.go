package leader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// FileLock keeps the lease record in a file shared by the processes of one machine. Every read
// and read-modify-write happens under an exclusive flock on Path+".lock" (a separate file that
// is never replaced), and the record is written to a temporary file, fsynced and renamed over
// Path, so a crash never leaves a torn record. An Update succeeds only if the record is still
// the one this lock last saw (optimistic concurrency, like a Lease's resourceVersion). A
// corrupt or empty record counts as free, with a warning.
type FileLock struct {
	Path     string
	ID       string
	Name     string // "namespace/name", for Describe
	Logger   *slog.Logger
	OnRecord func(msg string) // RecordEvent target; may be nil

	mu       sync.Mutex
	observed []byte // the record's bytes as this lock last read or wrote them
}

var _ rl.Interface = (*FileLock)(nil)

// withLock runs fn while holding the exclusive lock.
func (l *FileLock) withLock(fn func() error) error {
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(l.Path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("leader: locking %s: %w", f.Name(), err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	return fn()
}

// read returns the stored bytes; os.ErrNotExist when there is no record yet.
func (l *FileLock) read() ([]byte, error) {
	return os.ReadFile(l.Path)
}

// readLocked reads the record under the lock.
func (l *FileLock) readLocked() ([]byte, error) {
	var raw []byte
	err := l.withLock(func() error {
		var err error
		raw, err = l.read()
		return err
	})
	return raw, err
}

// parse decodes raw; a corrupt or empty record is a free lease.
func (l *FileLock) parse(raw []byte) record {
	var r record
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &r) != nil {
		if l.Logger != nil {
			l.Logger.Warn("lease record is corrupt or empty; treating the lease as free", "file", l.Path)
		}
		return record{}
	}
	return r
}

// write replaces the record atomically: temporary file, fsync, rename, fsync of the directory.
func (l *FileLock) write(raw []byte) error {
	dir := filepath.Dir(l.Path)
	tmp, err := os.CreateTemp(dir, filepath.Base(l.Path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), l.Path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Get returns the current record (NotFound when none was ever written).
func (l *FileLock) Get(context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	raw, err := l.readLocked()
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, apierrors.NewNotFound(leaseResource, l.Name)
	}
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	l.observed = raw
	l.mu.Unlock()
	return l.parse(raw).election(), raw, nil
}

// Create writes the first record; AlreadyExists if another process wrote one first.
func (l *FileLock) Create(_ context.Context, ler rl.LeaderElectionRecord) error {
	raw := toRecord(ler).encode()
	return l.withLock(func() error {
		if _, err := os.Stat(l.Path); err == nil {
			return apierrors.NewAlreadyExists(leaseResource, l.Name)
		}
		if err := l.write(raw); err != nil {
			return err
		}
		l.mu.Lock()
		l.observed = raw
		l.mu.Unlock()
		return nil
	})
}

// Update writes ler if the record is still the one this lock last saw; Conflict otherwise.
func (l *FileLock) Update(_ context.Context, ler rl.LeaderElectionRecord) error {
	raw := toRecord(ler).encode()
	return l.withLock(func() error {
		cur, err := l.read()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		l.mu.Lock()
		seen := l.observed
		l.mu.Unlock()
		if !bytes.Equal(cur, seen) {
			return apierrors.NewConflict(leaseResource, l.Name, errors.New("the lease record changed since it was read"))
		}
		if err := l.write(raw); err != nil {
			return err
		}
		l.mu.Lock()
		l.observed = raw
		l.mu.Unlock()
		return nil
	})
}

// Peek reads the record without taking part in the election (for the mirror and /leader).
func (l *FileLock) Peek() (record, bool) {
	raw, err := l.readLocked()
	if err != nil {
		return record{}, false
	}
	return l.parse(raw), true
}

// RecordEvent reports an election event ("became leader", "stopped leading").
func (l *FileLock) RecordEvent(s string) {
	if l.OnRecord != nil {
		l.OnRecord(s)
	}
}

// Identity is this candidate's identity (POD_NAME).
func (l *FileLock) Identity() string { return l.ID }

// Describe names the lock.
func (l *FileLock) Describe() string { return l.Name + " (" + l.Path + ")" }
