package server_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/server"
)

// BenchmarkGuard is what the request guard adds to a cheap read (GET /version through the
// handler, as if through a loopback listener, so the Host check runs): without tokens, with a
// bearer token, and with the dashboard's cookie.
func BenchmarkGuard(b *testing.B) {
	loopback := context.WithValue(context.Background(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000})
	open := newEnv(b)
	tokens := server.NewTokens()
	if err := tokens.Add("alice-token", server.User{Name: "alice"}); err != nil {
		b.Fatal(err)
	}
	guarded := newEnv(b, func(c *server.Config, _ *cache.Config) { c.Tokens = tokens })
	// The cookie the login sets for alice-token.
	login := httptest.NewRequestWithContext(loopback, "POST", "http://127.0.0.1:3000/ui/login", nil)
	login.PostForm = map[string][]string{"token": {"alice-token"}}
	lw := httptest.NewRecorder()
	guarded.srv.Handler().ServeHTTP(lw, login)
	cookies := lw.Result().Cookies()
	if len(cookies) != 1 {
		b.Fatalf("login set %d cookies", len(cookies))
	}
	for _, sc := range []struct {
		name   string
		e      *env
		header map[string]string
	}{
		{"no-token", open, nil},
		{"bearer", guarded, map[string]string{"Authorization": "Bearer alice-token"}},
		{"cookie", guarded, map[string]string{"Cookie": cookies[0].Name + "=" + cookies[0].Value, "Sec-Fetch-Site": "same-origin"}},
	} {
		b.Run(sc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequestWithContext(loopback, "GET", "http://127.0.0.1:3000/version", nil)
				for k, v := range sc.header {
					r.Header.Set(k, v)
				}
				w := httptest.NewRecorder()
				sc.e.srv.Handler().ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
