package server

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSessionsEnd: a session is good for sessionTTL after its login, on its listener only, and
// then dropped; the sessions kept stay within maxSessions, the one ending first going first.
func TestSessionsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s sessions
		alice := User{Name: "alice"}
		id := s.open(alice, "127.0.0.1:3000")
		u, ok := s.user(id, "127.0.0.1:3000")
		require.True(t, ok)
		assert.Equal(t, alice, u)
		_, ok = s.user(id, "127.0.0.1:3001")
		assert.False(t, ok, "another listener")
		_, ok = s.user(id+"x", "127.0.0.1:3000")
		assert.False(t, ok, "another id")

		time.Sleep(sessionTTL - time.Second)
		_, ok = s.user(id, "127.0.0.1:3000")
		assert.True(t, ok, "a second before its end")
		time.Sleep(time.Second)
		_, ok = s.user(id, "127.0.0.1:3000")
		assert.False(t, ok, "at its end")
		assert.Equal(t, 0, s.len(), "an ended session is dropped")
	})
}

func TestSessionsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s sessions
		first := s.open(User{Name: "u"}, "l")
		time.Sleep(time.Second)
		for range maxSessions - 1 {
			s.open(User{Name: "u"}, "l")
		}
		require.Equal(t, maxSessions, s.len())
		last := s.open(User{Name: "u"}, "l")
		assert.Equal(t, maxSessions, s.len(), "at most maxSessions are kept")
		_, ok := s.user(first, "l")
		assert.False(t, ok, "the session ending first went")
		_, ok = s.user(last, "l")
		assert.True(t, ok)

		// Once sessions have ended, a login drops all of them.
		time.Sleep(sessionTTL)
		s.open(User{Name: "u"}, "l")
		assert.Equal(t, 1, s.len())
	})
}
