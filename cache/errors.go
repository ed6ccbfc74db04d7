package cache

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the store returns wraps exactly one of them, so callers map them
// with errors.Is (the server turns them into Kubernetes Status objects in one place).
var (
	ErrNotFound      = errors.New("cache: not found")
	ErrAlreadyExists = errors.New("cache: already exists")
	ErrConflict      = errors.New("cache: conflict")
	ErrGone          = errors.New("cache: resource version expired")
	ErrForbidden     = errors.New("cache: forbidden")
	ErrInvalid       = errors.New("cache: invalid")
	ErrTooSlow       = errors.New("cache: watcher fell behind")
	ErrClosed        = errors.New("cache: store closed")
	// ErrUnavailable: the store's truth cannot be reached (etcd is down): a 503.
	ErrUnavailable = errors.New("cache: storage unavailable")
	// ErrTimeout: the store's truth did not answer, or a read could not be made fresh, in time:
	// a 504.
	ErrTimeout = errors.New("cache: storage timeout")
	// ErrTooLarge: the object is larger than the store's truth accepts: a 413.
	ErrTooLarge = errors.New("cache: object too large")
)

// Error carries the data a caller needs to describe a store failure: which object, which
// field (for ErrInvalid) and a human message in Kubernetes' wording where one exists.
type Error struct {
	Err     error  // one of the sentinels above
	Key     Key    // the object concerned; zero for store-wide failures (ErrGone on a watch)
	Field   string // for ErrInvalid: the offending field path, e.g. "metadata.finalizers"
	Message string // detail, e.g. "too old resource version: 101 (110)"
}

func (e *Error) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("%v: %s: %s", e.Err, e.Key, e.Message)
	}
	return fmt.Sprintf("%v: %s", e.Err, e.Key)
}

// Unwrap makes errors.Is(err, ErrNotFound) and friends work.
func (e *Error) Unwrap() error { return e.Err }

func newErr(sentinel error, key Key, format string, args ...any) *Error {
	return &Error{Err: sentinel, Key: key, Message: fmt.Sprintf(format, args...)}
}

// goneError is the ErrGone a watch or paged list from rv gets when the history no longer covers it.
func goneError(rv, oldest uint64) *Error {
	return &Error{Err: ErrGone, Message: fmt.Sprintf("too old resource version: %d (%d)", rv, oldest)}
}
