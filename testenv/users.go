package testenv

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/certs"
	"github.com/opemu/opemu/server"
	"k8s.io/client-go/rest"
)

// Users, as envtest provisions them: with Options.RBAC the server decides every request by
// the Roles and bindings stored (kube's bootstrap policy included); Environment.Config is the
// admin (group system:masters, as envtest's), and AddUser makes a client for anyone else, to
// run a suite's manager as its ServiceAccount or to see the forbidden a user would get.

// User is a user to add, as envtest's: a name and groups.
type User struct {
	// Name is the user's name (system:serviceaccount:<namespace>:<name> for a ServiceAccount).
	Name string
	// Groups are the groups the user belongs to (system:authenticated is added).
	Groups []string
}

// AuthenticatedUser is a user the server authenticates, as envtest's.
type AuthenticatedUser struct {
	cfg  *rest.Config
	kube []byte
}

// Config is a rest.Config that authenticates as the user. It is the caller's to modify.
func (u *AuthenticatedUser) Config() *rest.Config { return rest.CopyConfig(u.cfg) }

// KubeConfig is a kubeconfig authenticating as the user (for kubectl, or a process under test).
func (u *AuthenticatedUser) KubeConfig() ([]byte, error) { return u.kube, nil }

// AddUser makes user known to the server and returns its credentials (a bearer token),
// configured as baseConfig (nil: the environment's Config) but for its authentication. The
// user can do what the bindings stored grant it: nothing but discovery until some do. It needs
// Options.RBAC (without it the server authenticates nobody and allows everything).
func (e *Environment) AddUser(user User, baseConfig *rest.Config) (*AuthenticatedUser, error) {
	if e.tokens == nil {
		return nil, errors.New("testenv: AddUser needs Options.RBAC (with AlwaysAllow the server authenticates nobody)")
	}
	if user.Name == "" {
		return nil, errors.New("testenv: AddUser: the user needs a name")
	}
	token := newToken()
	if err := e.tokens.Add(token, server.User{Name: user.Name, UID: user.Name, Groups: user.Groups}); err != nil {
		return nil, fmt.Errorf("testenv: AddUser: %w", err)
	}
	if baseConfig == nil {
		baseConfig = e.Config
	}
	cfg := rest.AnonymousClientConfig(baseConfig)
	cfg.BearerToken = token
	return &AuthenticatedUser{cfg: cfg, kube: kubeConfig(cfg.Host, token, cfg.CAData)}, nil
}

// authentication sets up opts' users in cfg. With RBAC: HTTPS with a certificate made for
// 127.0.0.1 (kubectl sends a kubeconfig's token over HTTPS only, as envtest's control plane
// serves it), and a token store holding the admin's token. It returns the admin's token and
// the CA the serving certificate chains to (both empty without RBAC).
func (e *Environment) authentication(opts Options, cfg *app.Config) (token string, caPEM []byte, err error) {
	if !opts.RBAC {
		return "", nil, nil
	}
	cfg.AuthorizationMode = app.AuthorizationRBAC
	if cfg.TLS == nil {
		caPEM, certPEM, keyPEM, err := certs.Generate([]string{"127.0.0.1", "localhost"}, time.Now())
		if err != nil {
			return "", nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return "", nil, err
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		e.caPEM = caPEM
	}
	if cfg.Tokens == nil {
		cfg.Tokens = server.NewTokens()
	}
	e.tokens = cfg.Tokens
	token = newToken()
	_ = e.tokens.Add(token, app.AdminUser) // a new token is never empty nor white space
	return token, e.caPEM, nil
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
