package leader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// FileLock keeps the lease record in a file shared by the processes of one machine. Every read
// and read-modify-write happens under an exclusive flock on Path+".lock" (a separate file that
// is never replaced), and the record is written to a temporary file, fsynced and renamed over
// Path, so a crash never leaves a torn record. An Update succeeds only if the record is still
// the one this lock last saw (optimistic concurrency, like a Lease's resourceVersion).
//
// A corrupt, empty, oversized or vanished record (SPEC §8) is never a reason for two leaders:
// the holder that last wrote it (while its lease runs) still sees its own record, so its next
// renewal repairs the file; every other candidate sees the lease held (by the holder it last
// knew, or unknownHolder) for LeaseDuration from when it first saw the damage, then free. One
// warning is logged per damaged content, not one per read. The file is read with a size cap.
type FileLock struct {
	Path     string
	ID       string
	Name     string // "namespace/name", for Describe
	Logger   *slog.Logger
	OnRecord func(msg string) // RecordEvent target; may be nil
	// LeaseDuration is how long a damaged record counts as held. Zero means 15 s.
	LeaseDuration time.Duration

	mu       sync.Mutex
	observed []byte // the record's bytes (or a stand-in, see readCurrent) as last read or written
	good     record // the last well-formed record this lock read or wrote
	haveGood bool
	warned   []byte // the damaged content last warned about, when warning is set
	warning  bool
}

var _ rl.Interface = (*FileLock)(nil)

// unknownHolder holds a damaged lease for a candidate that never saw a good record.
const unknownHolder = "<unknown: damaged lease record>"

// maxRecordBytes caps how much of the lease file is read: a record is about 200 bytes.
const maxRecordBytes = 64 << 10

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

// readCurrent returns the file's bytes, at most maxRecordBytes of them: a larger file reads as a
// stand-in naming its size and modification time (so a change to it is still a change), and a
// missing file, once this lock has seen a record, as a stand-in too (a record that vanished is
// damaged, not free). os.ErrNotExist only when no record was ever seen.
//
// Damaged content carries its modification time (a missing file its directory's): the elector
// times a record from when its bytes last changed, and the same damage twice ("garbage", an
// empty file) with a repair in between that a starved candidate never read must not look
// unchanged to it, or it would take the lease from a leader that renewed meanwhile.
func (l *FileLock) readCurrent() ([]byte, error) {
	f, err := os.Open(l.Path)
	if errors.Is(err, os.ErrNotExist) {
		l.mu.Lock()
		seen := l.haveGood
		l.mu.Unlock()
		if seen {
			missing := []byte("\x00missing")
			if fi, err := os.Stat(filepath.Dir(l.Path)); err == nil {
				missing = fmt.Appendf(missing, " dir-mtime=%d", fi.ModTime().UnixNano())
			}
			return missing, nil
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	oversized := func(fi os.FileInfo) []byte {
		return fmt.Appendf(nil, "\x00oversized size=%d mtime=%d", fi.Size(), fi.ModTime().UnixNano())
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxRecordBytes {
		return oversized(fi), nil
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxRecordBytes {
		return oversized(fi), nil
	}
	if _, ok := parse(raw); !ok {
		raw = fmt.Appendf(raw, "\x00mtime=%d", fi.ModTime().UnixNano())
	}
	return raw, nil
}

// parse decodes raw; ok is false for a damaged record. A record the elector wrote always has a
// lease duration (a released one has 1 s).
func parse(raw []byte) (r record, ok bool) {
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &r) != nil || r.LeaseDurationSeconds <= 0 {
		return record{}, false
	}
	return r, true
}

// view interprets raw as this candidate must (see FileLock), remembering a good record and
// warning once about damaged content.
func (l *FileLock) view(raw []byte) record {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := parse(raw); ok {
		l.good, l.haveGood, l.warning = r, true, false
		return r
	}
	if !l.warning || !bytes.Equal(raw, l.warned) {
		l.warned, l.warning = bytes.Clone(raw), true
		if l.Logger != nil {
			l.Logger.Warn("lease record is damaged (corrupt, empty, oversized or missing): its last holder repairs it at its next renewal; others wait for the lease duration",
				"file", l.Path, "lastHolder", l.good.HolderIdentity)
		}
	}
	duration := l.LeaseDuration
	if duration <= 0 {
		duration = 15 * time.Second
	}
	// Its own lease runs while no follower can have taken it: followers wait the duration the
	// record states, in whole seconds, which may be less than LeaseDuration.
	own := min(duration, time.Duration(l.good.LeaseDurationSeconds)*time.Second)
	if l.haveGood && l.good.HolderIdentity == l.ID && time.Since(l.good.RenewTime.Time) < own {
		return l.good // still this lock's lease: its renewal writes over the damage
	}
	holder := unknownHolder
	if l.haveGood && l.good.HolderIdentity != "" && l.good.HolderIdentity != l.ID {
		holder = l.good.HolderIdentity
	}
	return record{
		HolderIdentity:       holder,
		LeaseDurationSeconds: int((duration + time.Second - 1) / time.Second),
		AcquireTime:          l.good.AcquireTime,
		RenewTime:            l.good.RenewTime,
		LeaderTransitions:    l.good.LeaderTransitions,
	}
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

// Get returns the current record (NotFound when none was ever written). A damaged record comes
// back as view says, with its own bytes as the raw record, so the elector starts timing it
// from now.
func (l *FileLock) Get(context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	var raw []byte
	err := l.withLock(func() error {
		var err error
		raw, err = l.readCurrent()
		return err
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, apierrors.NewNotFound(leaseResource, l.Name)
	}
	if err != nil {
		return nil, nil, err
	}
	r := l.view(raw)
	l.mu.Lock()
	l.observed = raw
	l.mu.Unlock()
	return r.election(), raw, nil
}

// wrote records that raw, encoding r, is now the file's content.
func (l *FileLock) wrote(raw []byte, r record) {
	l.mu.Lock()
	l.observed, l.good, l.haveGood, l.warning = raw, r, true, false
	l.mu.Unlock()
}

// Create writes the first record; AlreadyExists if another process wrote one first.
func (l *FileLock) Create(_ context.Context, ler rl.LeaderElectionRecord) error {
	r := toRecord(ler)
	raw := r.encode()
	return l.withLock(func() error {
		if _, err := os.Stat(l.Path); err == nil {
			return apierrors.NewAlreadyExists(leaseResource, l.Name)
		}
		if err := l.write(raw); err != nil {
			return err
		}
		l.wrote(raw, r)
		return nil
	})
}

// Update writes ler if the record is still the one this lock last saw; Conflict otherwise.
func (l *FileLock) Update(_ context.Context, ler rl.LeaderElectionRecord) error {
	r := toRecord(ler)
	raw := r.encode()
	return l.withLock(func() error {
		cur, err := l.readCurrent()
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
		l.wrote(raw, r)
		return nil
	})
}

// Peek reads the record without taking part in the election (for the mirror and /leader). It
// takes no flock: records are replaced by rename, so a read sees a whole one (or damage, which
// view handles), and a process holding the lock cannot make /leader wait.
func (l *FileLock) Peek() (record, bool) {
	raw, err := l.readCurrent()
	if err != nil {
		return record{}, false
	}
	return l.view(raw), true
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
