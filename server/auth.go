package server

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
)

// Authentication (SPEC §13): bearer tokens as kube-apiserver's static token file defines them,
// and the user they name carried in the request's context.

// User is an authenticated user, as kube-apiserver's user.Info names one.
type User struct {
	Name   string
	UID    string
	Groups []string
}

// Anonymous is the user kube-apiserver reports for a request without credentials. opemu puts no
// user in the context when authentication is off; callers that must name someone (an
// authorization review, an admission request's userInfo) can name this one.
var Anonymous = User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// groupAuthenticated is the group kube-apiserver adds to every authenticated user.
const groupAuthenticated = "system:authenticated"

type userKey struct{}

// WithUser returns ctx carrying u, as the request guard does for an authenticated request.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user the request was authenticated as. ok is false when the server
// authenticates nobody (no TOKEN or TOKEN_FILE) or ctx does not come from a request.
func UserFrom(ctx context.Context) (u User, ok bool) {
	u, ok = ctx.Value(userKey{}).(User)
	return u, ok
}

// Tokens is a set of bearer tokens and the users they authenticate. Tokens are kept only as
// SHA-256 digests, so a lookup takes the same time whatever the presented token shares with a
// valid one. A Tokens is safe for concurrent use: a token added while the server runs
// (testenv's AddUser) authenticates the next request.
type Tokens struct {
	mu     sync.RWMutex
	bearer map[[sha256.Size]byte]User // sha256(token) → user
}

// NewTokens returns an empty set.
func NewTokens() *Tokens {
	return &Tokens{bearer: map[[sha256.Size]byte]User{}}
}

// Add makes token authenticate u. A later Add of the same token replaces the user, as a later
// line of kube-apiserver's token file does.
func (t *Tokens) Add(token string, u User) error {
	if token == "" {
		return errors.New("server: empty token")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return errors.New("server: a token may not contain white space")
	}
	if !slices.Contains(u.Groups, groupAuthenticated) {
		u.Groups = append(slices.Clip(u.Groups), groupAuthenticated)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bearer[sha256.Sum256([]byte(token))] = u
	return nil
}

// Len is the number of distinct tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.bearer)
}

// Authenticate returns the user token names.
func (t *Tokens) Authenticate(token string) (User, bool) {
	if t == nil {
		return User{}, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	u, ok := t.bearer[sha256.Sum256([]byte(token))]
	return u, ok
}

// ReadTokenFile reads kube-apiserver's static token file (--token-auth-file): CSV records of
// token, user name, uid and optionally a quoted, comma-separated list of groups:
//
//	31ada4fd-adec-460c-809a-9e56ceb75269,alice,1001,"developers,ops"
//
// As in kube-apiserver, a record with fewer than three columns is an error, a record with an
// empty token is skipped, and a token given twice authenticates the later record's user.
func ReadTokenFile(path string, into *Tokens) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	for n := 1; ; n++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("token file %s: %w", path, err)
		}
		if len(rec) < 3 {
			return fmt.Errorf("token file %s must have at least 3 columns (token, user name, user uid), found %d on record %d", path, len(rec), n)
		}
		token := strings.TrimSpace(rec[0])
		if token == "" {
			continue
		}
		u := User{Name: rec[1], UID: rec[2]}
		if len(rec) >= 4 && rec[3] != "" {
			u.Groups = strings.Split(rec[3], ",")
		}
		if u.Name == "" {
			return fmt.Errorf("token file %s: record %d has no user name", path, n)
		}
		if err := into.Add(token, u); err != nil {
			return fmt.Errorf("token file %s: record %d: %w", path, n, err)
		}
	}
	return nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header, parsed as
// kube-apiserver's bearertoken authenticator does (scheme case-insensitive).
func bearerToken(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
