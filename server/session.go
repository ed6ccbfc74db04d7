package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// The dashboard's sessions (SPEC §13): a browser that gave a valid token once gets a session,
// and its cookie holds the session's id, never the token nor anything derived from it. A
// session is random (a stolen cookie tells nothing of the token, and is no good after a
// restart), bound to the listener that opened it (a cookie is sent to every port of a host:
// another server there, or another listener of this one, does not take it), and ends
// sessionTTL after the login, when the browser drops the cookie too.

const (
	// sessionTTL is how long a dashboard session lasts after its login: a working day.
	sessionTTL = 12 * time.Hour
	// maxSessions bounds the sessions kept (about 150 bytes each); beyond it, a login ends the
	// session that would end first.
	maxSessions = 10_000
)

// session is one logged-in browser.
type session struct {
	user User
	// listener is the address of the listener the login came through.
	listener string
	expires  time.Time
}

// sessions are the open dashboard sessions of one Server, by the SHA-256 of their id. Safe for
// concurrent use. The zero value is ready (time.Now is its clock).
type sessions struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]session
}

// open starts a session of u on listener and returns its id (32 random bytes, base64url).
func (s *sessions) open(u User, listener string) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics if the OS cannot give randomness)
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[[sha256.Size]byte]session{}
	}
	if len(s.byID) >= maxSessions {
		s.evictLocked(now)
	}
	s.byID[sha256.Sum256([]byte(id))] = session{user: u, listener: listener, expires: now.Add(sessionTTL)}
	return id
}

// evictLocked drops the ended sessions and, if none had ended, the one that ends first.
func (s *sessions) evictLocked(now time.Time) {
	var first [sha256.Size]byte
	var firstEnd time.Time
	n := len(s.byID)
	for k, se := range s.byID {
		if !now.Before(se.expires) {
			delete(s.byID, k)
			continue
		}
		if firstEnd.IsZero() || se.expires.Before(firstEnd) {
			first, firstEnd = k, se.expires
		}
	}
	if len(s.byID) == n {
		delete(s.byID, first)
	}
}

// user returns the user of the session id, when it is open and was opened on listener.
func (s *sessions) user(id, listener string) (User, bool) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.byID[k]
	if !ok {
		return User{}, false
	}
	if !time.Now().Before(se.expires) {
		delete(s.byID, k)
		return User{}, false
	}
	return se.user, se.listener == listener
}

// len is the number of sessions kept, ended ones not yet dropped included.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
