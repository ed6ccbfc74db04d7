package app

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/url"

	"github.com/opemu/opemu/server"
)

// The values of Config.AuthorizationMode (AUTHORIZATION_MODE), as kube-apiserver's
// --authorization-mode names them.
const (
	AuthorizationAlwaysAllow = "AlwaysAllow"
	AuthorizationRBAC        = "RBAC"
)

// AdminUser is the user the single TOKEN, and a generated token, authenticate.
var AdminUser = server.User{Name: "admin", UID: "admin", Groups: []string{"system:masters"}}

// security returns the tokens the server authenticates with, once the listen address is known,
// and says in the log what protects it. With no token configured on a listener beyond loopback
// it generates one (unless InsecureNoAuth) and logs it with a ready-to-open dashboard URL, as
// Jupyter does.
func security(log *slog.Logger, cfg Config, addr net.Addr) (*server.Tokens, error) {
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	if b := cfg.SelfSigned; b != nil {
		log.Info("serving HTTPS with a self-signed certificate", "ca", b.CAPath, "newCA", b.NewCA, "newCertificate", b.NewCert)
	} else if cfg.TLS != nil {
		log.Info("serving HTTPS")
	}
	tokens := cfg.Tokens
	loopback := server.IsLoopback(addr)
	base := scheme + "://" + dialAddr(addr)
	rbacOn := cfg.AuthorizationMode == AuthorizationRBAC
	switch {
	case tokens != nil:
		log.Info("authentication on: every request but /healthz, /readyz and /livez needs a bearer token", "tokens", tokens.Len())
	case loopback && rbacOn:
		// RBAC decides by user: the admin needs a name, and a request without one is
		// system:anonymous, as on a cluster.
		token := randomToken()
		tokens = server.NewTokens()
		if err := tokens.Add(token, AdminUser); err != nil {
			return nil, err
		}
		log.Warn("RBAC on with no TOKEN: generated one for the admin (system:masters); requests without a token are system:anonymous",
			"token", token, "kubeconfig", "opemu kubeconfig --server "+base+" --token "+token)
	case loopback:
	case cfg.InsecureNoAuth:
		log.Warn("listening beyond loopback WITHOUT authentication (INSECURE_NO_AUTH=true): anyone who reaches this address can read and change everything")
	default:
		token := randomToken()
		tokens = server.NewTokens()
		if err := tokens.Add(token, AdminUser); err != nil {
			return nil, err
		}
		log.Warn("listening beyond loopback with no TOKEN: generated one (set TOKEN, TOKEN_FILE or INSECURE_NO_AUTH=true to choose)",
			"token", token,
			"dashboard", base+"/ui/?token="+url.QueryEscape(token),
			"kubeconfig", "opemu kubeconfig --server "+base+" --token "+token)
	}
	if cfg.TLS == nil && tokens != nil {
		log.Warn("plain HTTP with a token: kubectl and client-go's kubeconfig send a token only over HTTPS, and here it travels in clear text; " +
			"TLS=self-signed serves HTTPS (curl and the dashboard work either way)")
	}
	return tokens, nil
}

// dialAddr is where a client on this machine reaches addr: the wildcard addresses become
// 127.0.0.1.
func dialAddr(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
