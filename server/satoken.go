package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/opemu/opemu/cache"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// ServiceAccount tokens (the TokenRequest subresource, serviceaccounts/<name>/token): JWTs this
// server signs and verifies, with kube-apiserver's claims, naming
// system:serviceaccount:<namespace>:<name> and its groups. They are signed with a key made when
// the server starts (Config.ServiceAccountKey to share one), and are valid while the
// ServiceAccount they name exists with the same uid, as kube-apiserver's bound tokens.

// ServiceAccountIssuer is the issuer (and default audience) of the tokens, kube-apiserver's
// usual --service-account-issuer.
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// NewServiceAccountKey returns a new signing key for Config.ServiceAccountKey.
func NewServiceAccountKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// saClaims are the claims of kube-apiserver's ServiceAccount tokens.
type saClaims struct {
	jwt.RegisteredClaims
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// issueToken signs a token for the ServiceAccount namespace/name (uid) valid for ttl from now.
func (s *Server) issueToken(namespace, name, uid string, audiences []string, now time.Time, ttl time.Duration) (string, time.Time, error) {
	exp := now.Add(ttl)
	var c saClaims
	c.Issuer = ServiceAccountIssuer
	c.Subject = serviceaccount.MakeUsername(namespace, name)
	c.Audience = audiences
	c.IssuedAt = jwt.NewNumericDate(now)
	c.NotBefore = jwt.NewNumericDate(now)
	c.ExpiresAt = jwt.NewNumericDate(exp)
	c.ID = uuid.NewString()
	c.Kubernetes.Namespace = namespace
	c.Kubernetes.ServiceAccount.Name = name
	c.Kubernetes.ServiceAccount.UID = uid
	token, err := jwt.NewWithClaims(jwt.SigningMethodES256, c).SignedString(s.saKey)
	return token, exp.Truncate(time.Second), err
}

// errBadToken is any token this server did not issue, or one no longer valid.
var errBadToken = errors.New("invalid bearer token")

// verifiedTokens remembers the claims of the ServiceAccount tokens whose signature was checked,
// by their SHA-256, so a client's every request does not verify the same signature again
// (kube-apiserver caches token authentication too). Lifetime and the ServiceAccount are still
// checked on every request. Reset when it holds maxVerifiedTokens.
type verifiedTokens struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*saClaims
}

const maxVerifiedTokens = 4096

func (v *verifiedTokens) get(k [sha256.Size]byte) *saClaims {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.m[k]
}

func (v *verifiedTokens) put(k [sha256.Size]byte, c *saClaims) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= maxVerifiedTokens {
		v.m = map[[sha256.Size]byte]*saClaims{}
	}
	v.m[k] = c
}

// serviceAccountUser returns the user of a ServiceAccount token: valid signature, issuer,
// audience and lifetime, and a ServiceAccount that still exists with the uid it names.
func (s *Server) serviceAccountUser(ctx context.Context, token string) (User, []string, error) {
	if strings.Count(token, ".") != 2 {
		return User{}, nil, errBadToken // not a JWT
	}
	k := sha256.Sum256([]byte(token))
	c := s.saVerified.get(k)
	now := s.cfg.Clock.Now()
	if c == nil {
		c = new(saClaims)
		_, err := jwt.ParseWithClaims(token, c, func(*jwt.Token) (any, error) { return &s.saKey.PublicKey, nil },
			jwt.WithValidMethods([]string{jwt.SigningMethodES256.Alg()}), jwt.WithIssuer(ServiceAccountIssuer),
			jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return now }))
		if err != nil || !slices.Contains(c.Audience, ServiceAccountIssuer) {
			return User{}, nil, errBadToken
		}
		s.saVerified.put(k, c)
	} else if !now.Before(c.ExpiresAt.Time) || now.Before(c.NotBefore.Time) {
		return User{}, nil, errBadToken
	}
	ns, name := c.Kubernetes.Namespace, c.Kubernetes.ServiceAccount.Name
	sa, err := s.cfg.Registry.Client("opemu").Get(ctx, cache.Key{Resource: "serviceaccounts", Namespace: ns, Name: name})
	if err != nil || sa.UID() != c.Kubernetes.ServiceAccount.UID {
		return User{}, nil, errBadToken
	}
	return User{Name: serviceaccount.MakeUsername(ns, name), UID: sa.UID(),
		Groups: append(serviceaccount.MakeGroupNames(ns), groupAuthenticated)}, c.Audience, nil
}
