package server_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzGuard sends requests with arbitrary Host, Origin, Sec-Fetch-Site, Authorization and
// cookie through a server with tokens, as if through a loopback listener. The guard must never
// panic or answer 5xx; a write with a foreign Origin is always 403; a request without the
// token is never served (but the probes and the login page).
func FuzzGuard(f *testing.F) {
	e := newEnv(f, withTokens(f))
	for _, seed := range []struct {
		method                             uint8
		path, host, origin, site, auth, ck string
	}{
		{0, "/api", "127.0.0.1:3000", "", "", "Bearer alice-token", ""},
		{1, appsPath, "localhost:3000", "http://localhost:3000", "same-origin", "Bearer alice-token", ""},
		{1, appsPath, "127.0.0.1:3000", "http://evil.example", "cross-site", "Bearer alice-token", ""},
		{2, appsPath + "/x", "attacker.example:3000", "", "", "", ""},
		{3, "/ui/", "[::1]:3000", "null", "same-site", "", "opemu_session_3000=x"},
		{4, "/healthz", "LOCALHOST.", "HTTP://LOCALHOST:80", "none", "bearer  bob-token", ""},
		{5, "/ui/login", "127.0.0.1", "http://127.0.0.1", "", "Basic x", ""},
	} {
		f.Add(seed.method, seed.path, seed.host, seed.origin, seed.site, seed.auth, seed.ck)
	}
	methods := []string{"GET", "POST", "DELETE", "PATCH", "PUT", "OPTIONS", "HEAD"}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}
	f.Fuzz(func(t *testing.T, m uint8, path, host, origin, site, auth, ck string) {
		method := methods[int(m)%len(methods)]
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		u, err := url.ParseRequestURI(path)
		if err != nil || host == "" {
			return
		}
		r := httptest.NewRequestWithContext(context.WithValue(context.Background(), http.LocalAddrContextKey, loopback), method, "http://127.0.0.1:3000/", strings.NewReader(`{}`))
		r.URL = u
		r.RequestURI = u.RequestURI()
		r.Host = host
		for k, v := range map[string]string{"Origin": origin, "Sec-Fetch-Site": site, "Authorization": auth, "Cookie": ck} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %s (Host %q, Origin %q): %d %s", method, path, host, origin, w.Code, w.Body)
		}
		write := method != "GET" && method != "HEAD" && method != "OPTIONS"
		if write && origin != "" && !sameOrigin(origin, host) && w.Code != http.StatusForbidden {
			t.Fatalf("a %s from Origin %q to Host %q was answered %d, not 403", method, origin, host, w.Code)
		}
		authed := strings.Contains(auth, "alice-token") || strings.Contains(auth, "bob-token")
		exempt := u.Path == "/healthz" || u.Path == "/readyz" || u.Path == "/livez" || u.Path == "/ui/login"
		if !authed && !exempt && w.Code < 300 {
			t.Fatalf("%s %s without a token was served: %d %s", method, path, w.Code, w.Body)
		}
	})
}

// sameOrigin is the test's own idea of an origin on plain HTTP matching a Host header.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(u.Scheme, "http") || u.Host == "" {
		return false
	}
	return strings.EqualFold(strings.TrimSuffix(u.Host, ":80"), strings.TrimSuffix(host, ":80"))
}
