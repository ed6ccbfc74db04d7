package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
)

// The request guard (SPEC §13) stands in front of every route: the API, the SSE watch, the
// dashboard, the product's own routes and pprof. In order it
//
//  1. refuses a Host that is not a loopback name when the listener is a loopback address, so a
//     DNS-rebinding page (attacker.example resolving to 127.0.0.1) cannot read or write;
//  2. answers CORS preflights, and adds CORS headers, only for origins in ALLOWED_ORIGINS;
//  3. refuses a write (any method but GET, HEAD and OPTIONS) that a browser sends from another
//     origin, by its Origin and Sec-Fetch-Site headers. Browsers send no-preflight writes (form
//     posts, text/plain or typeless fetches, sendBeacon) to any origin; this is what stops them.
//     curl, kubectl and client-go send no Origin and are unaffected;
//  4. authenticates the request when tokens are configured: a bearer token, or the dashboard's
//     cookie on a same-origin request. Health probes and the dashboard's login need none.
//
// Refusals are 403 Status objects that say what to configure; a missing or wrong token is
// kube-apiserver's 401 Unauthorized Status.

// listenerKey marks a connection's context with its listener (a listener value; Run sets it).
type listenerKey struct{}

// listener is what a request knows of the listener it came through.
type listener struct {
	// loopback: the listener is a loopback address (see IsLoopback).
	loopback bool
	// addr is the listener's address, which the dashboard's sessions are bound to.
	addr string
}

// IsLoopback reports whether addr is a loopback address (127.0.0.0/8, ::1): a listener there
// is reachable from this machine only. The wildcard addresses (":3000", "0.0.0.0") are not.
func IsLoopback(addr net.Addr) bool {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.IsLoopback()
	}
	if addr == nil {
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isLoopbackListener reports whether r came through a loopback listener: the one Run serves,
// or, for a handler served elsewhere (httptest), the connection's local address.
func isLoopbackListener(r *http.Request) bool {
	return listenerOf(r).loopback
}

// listenerOf returns the listener r came through: the one Run serves, or, for a handler served
// elsewhere (httptest), the connection's local address.
func listenerOf(r *http.Request) listener {
	if v, ok := r.Context().Value(listenerKey{}).(listener); ok {
		return v
	}
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	l := listener{loopback: IsLoopback(addr)}
	if addr != nil {
		l.addr = addr.String()
	}
	return l
}

// authExempt are the routes that need no token: probes, and the dashboard's login page.
var authExempt = map[string]bool{"/healthz": true, "/readyz": true, "/livez": true, loginPath: true}

// guard is the middleware described above.
func (s *Server) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := c.Request()
		h := c.Response().Header()
		// Browsers must not sniff JSON into HTML or script, nor frame the dashboard (clickjacking).
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")

		if isLoopbackListener(r) && !s.hostAllowed(r.Host) {
			return forbidden(fmt.Sprintf("the Host %q is not allowed on a loopback listener (a defence against DNS rebinding); "+
				"to serve this name, start opemu with ALLOWED_HOSTS=%s", r.Host, hostOnly(r.Host)))
		}

		origin := r.Header.Get("Origin")
		corsAllowed := origin != "" && s.allowedOrigins[normalizeOrigin(origin)]
		if corsAllowed {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Expose-Headers", "Warning, Retry-After, Location, Content-Type, Date")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			if !corsAllowed {
				return forbidden(fmt.Sprintf("cross-origin requests from %q are not allowed (no CORS for it); "+
					"to let a web page at that origin call opemu, start opemu with ALLOWED_ORIGINS=%s", origin, origin))
			}
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				h.Set("Access-Control-Allow-Headers", req)
			}
			h.Set("Access-Control-Max-Age", "600")
			return c.NoContent(http.StatusNoContent)
		}

		if isWrite(r.Method) && !corsAllowed {
			if origin != "" && normalizeOrigin(origin) != ownOrigin(r) {
				return forbidden(fmt.Sprintf("a cross-origin write from origin %q was refused (the defence against cross-site request forgery); "+
					"to let a web page at that origin write, start opemu with ALLOWED_ORIGINS=%s", origin, origin))
			}
			if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
				return forbidden(fmt.Sprintf("a write from another site (Sec-Fetch-Site: %s) was refused (the defence against cross-site request forgery); "+
					"to let a web page write, start opemu with ALLOWED_ORIGINS=<its origin>", site))
			}
		}

		if authExempt[r.URL.Path] || (s.cfg.Tokens == nil && s.cfg.Authorizer == nil && !impersonating(r)) {
			return next(c)
		}
		u, err := s.authenticate(c)
		if err != nil {
			return err
		}
		if u == nil { // answered: a dashboard page redirected to the login or to itself
			return nil
		}
		info := userInfo(*u)
		if impersonating(r) {
			if info, err = s.impersonate(c, info); info == nil || err != nil {
				return err // nil: answered, the impersonation was refused
			}
			r = c.Request()
		}
		ctx := WithUser(r.Context(), userOf(info))
		if s.cfg.Authorizer != nil {
			// The writer of a Role or binding, for RBAC's escalation checks.
			ctx = genericrequest.WithUser(ctx, info)
		}
		r = r.WithContext(ctx)
		c.SetRequest(r)
		if s.cfg.Authorizer != nil {
			if err := s.authorize(r, info); err != nil {
				if call := callOf(c); call != nil {
					call.Forbidden = true
				}
				return err
			}
		}
		return next(c)
	}
}

// authenticate finds the request's user from its client certificate (Config.ClientCA), its
// bearer token (a static token, or a
// ServiceAccount token) or, for a same-origin browser request, the dashboard's cookie. A
// dashboard page without credentials is redirected to the login (and one with ?token= to
// itself, with the cookie set); then it returns nil, nil. A request without credentials is
// Anonymous when an authorizer decides (or no tokens are configured), else a 401.
func (s *Server) authenticate(c *echo.Context) (*User, error) {
	r := c.Request()
	if s.x509 != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		// As kube-apiserver: a client certificate comes first; one that does not verify is a 401.
		res, ok, err := s.x509.AuthenticateRequest(r)
		if err != nil || !ok {
			return nil, unauthorized()
		}
		u := userOf(res.User)
		if !slices.Contains(u.Groups, groupAuthenticated) {
			u.Groups = append(slices.Clip(u.Groups), groupAuthenticated)
		}
		return &u, nil
	}
	if token, ok := bearerToken(r); ok {
		if u, ok := s.cfg.Tokens.Authenticate(token); ok {
			return &u, nil
		}
		if u, _, err := s.serviceAccountUser(r.Context(), token); err == nil {
			return &u, nil
		}
		return nil, unauthorized()
	}
	page := isDashboardPage(r)
	if page && r.URL.Query().Has("token") {
		// The ready-to-open URL opemu logs with a generated token: keep the token in the cookie
		// and drop it from the address bar (and so from history and Referer headers).
		u, ok := s.cfg.Tokens.Authenticate(r.URL.Query().Get("token"))
		if !ok {
			return nil, c.Redirect(http.StatusSeeOther, loginPath+"?failed=1")
		}
		s.startSession(c, u)
		return nil, c.Redirect(http.StatusSeeOther, dashboardPath)
	}
	if ck, err := r.Cookie(cookieName(r)); err == nil && sameOriginBrowser(r) {
		if u, ok := s.sessions.user(ck.Value, listenerOf(r).addr); ok {
			return &u, nil
		}
	}
	if page && s.cfg.Tokens != nil {
		return nil, c.Redirect(http.StatusSeeOther, loginPath)
	}
	if s.cfg.Tokens == nil || s.cfg.Authorizer != nil {
		// A request without credentials is anonymous, as kube-apiserver's --anonymous-auth,
		// when the authorizer decides what it may do, or when no tokens are configured.
		u := Anonymous
		return &u, nil
	}
	return nil, unauthorized()
}

// isWrite reports whether method may change something: browsers send these across origins
// without asking first only in their simple forms, and the guard refuses them all.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// sameOriginBrowser reports whether r may use the dashboard's cookie: a browser request from
// the dashboard's own origin (or one the user typed), never one another page sent.
// SameSite=Strict alone is not enough: a page on another port of the same host is same-site.
func sameOriginBrowser(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
		// Browsers send Sec-Fetch-Site only to trustworthy origins (https, loopback).
		origin := r.Header.Get("Origin")
		return origin == "" || normalizeOrigin(origin) == ownOrigin(r)
	}
	return false
}

// hostAllowed reports whether hostport (a Host header) names this machine's loopback or a
// name in ALLOWED_HOSTS. Loopback IP literals cannot be rebound; "localhost" is resolved by
// the browser itself.
func (s *Server) hostAllowed(hostport string) bool {
	host := hostOnly(hostport)
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range s.cfg.AllowedHosts {
		a = strings.ToLower(strings.TrimSuffix(a, "."))
		switch {
		case a == "*":
			return true
		case strings.HasPrefix(a, "."):
			if host == a[1:] || strings.HasSuffix(host, a) {
				return true
			}
		case host == a:
			return true
		}
	}
	return false
}

// hostOnly returns the host of a Host header: no port, no brackets, lower case, no final dot.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// ownOrigin is the origin a browser names for pages this server served to r's Host.
func ownOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return normalizeOrigin(scheme + "://" + r.Host)
}

// normalizeOrigin lower-cases an origin and drops its scheme's default port, so equal origins
// compare equal. Anything unparsable (including "null") is returned as is and matches nothing.
func normalizeOrigin(origin string) string {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return origin
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if scheme == "http" {
		host = strings.TrimSuffix(host, ":80")
	} else if scheme == "https" {
		host = strings.TrimSuffix(host, ":443")
	}
	return scheme + "://" + host
}

// ParseOrigin checks a browser origin given in ALLOWED_ORIGINS: scheme://host[:port] with the
// scheme http or https and nothing after the host.
func ParseOrigin(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an origin like http://localhost:5173 (scheme, host and port only)", origin)
	}
	return normalizeOrigin(u.Scheme + "://" + u.Host), nil
}

// forbidden is the guard's 403 Status: message says what was refused and what to configure.
func forbidden(message string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: message,
	}}
}

// unauthorized is kube-apiserver's answer to a request without valid credentials; kubectl
// words it "You must be logged in to the server (Unauthorized)".
func unauthorized() error {
	return apierrors.NewUnauthorized("Unauthorized")
}

// withListener returns the ConnContext for a server on ln (see listenerOf).
func withListener(ln net.Listener) func(ctx context.Context, _ net.Conn) context.Context {
	l := listener{loopback: IsLoopback(ln.Addr()), addr: ln.Addr().String()}
	return func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, listenerKey{}, l)
	}
}
