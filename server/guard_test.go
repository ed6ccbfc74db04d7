package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// req is one request of a guard test: method, path, headers, body.
type req struct {
	method, path string
	header       map[string]string
	body         string
}

// send makes r against e with the client's redirects off, so a 303 is seen as such.
func (e *env) send(r req) response {
	e.t.Helper()
	hr, err := http.NewRequest(r.method, e.http.URL+r.path, strings.NewReader(r.body))
	require.NoError(e.t, err)
	for k, v := range r.header {
		if k == "Host" {
			hr.Host = v
			continue
		}
		hr.Header.Set(k, v)
	}
	client := *e.http.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(hr)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// names lists the Applications stored in default.
func (e *env) names(t *testing.T) []string {
	t.Helper()
	items, err := e.store.List(context.Background(), cache.GroupResource{Group: "cloudnative.elide.dev", Resource: "applications"}, cache.InNamespace("default"))
	require.NoError(t, err)
	var out []string
	for _, o := range items.Items {
		out = append(out, o.Key().Name)
	}
	return out
}

func TestGuardHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		allowed []string
		host    string
		code    int
	}{
		{name: "127.0.0.1", host: "127.0.0.1:3000", code: 200},
		{name: "localhost", host: "localhost:3000", code: 200},
		{name: "localhost without port", host: "localhost", code: 200},
		{name: "LOCALHOST", host: "LOCALHOST:3000", code: 200},
		{name: "::1", host: "[::1]:3000", code: 200},
		{name: "another loopback address", host: "127.0.0.2:3000", code: 200},
		{name: "a rebinding name", host: "attacker.example:3000", code: 403},
		{name: "a rebinding name without port", host: "attacker.example", code: 403},
		{name: "a LAN address", host: "192.168.1.5:3000", code: 403},
		{name: "localhost's subdomain", host: "a.localhost:3000", code: 403},
		{name: "allowed by name", allowed: []string{"opemu.test"}, host: "opemu.test:3000", code: 200},
		{name: "allowed name, other name", allowed: []string{"opemu.test"}, host: "x.opemu.test:3000", code: 403},
		{name: "allowed domain", allowed: []string{".opemu.test"}, host: "x.opemu.test", code: 200},
		{name: "allowed domain itself", allowed: []string{".opemu.test"}, host: "opemu.test", code: 200},
		{name: "any allowed", allowed: []string{"*"}, host: "attacker.example", code: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.AllowedHosts = tt.allowed })
			for _, path := range []string{"/api", "/healthz", "/watch?kind=none", "/ui/"} {
				if tt.code == 200 && path == "/watch?kind=none" {
					continue // a stream: its refusal is what matters here
				}
				r := e.send(req{method: "GET", path: path, header: map[string]string{"Host": tt.host}})
				if tt.code == 403 {
					m := status(t, r, 403, "Forbidden")
					assert.Contains(t, m["message"], "ALLOWED_HOSTS=", path)
				} else {
					assert.Equal(t, tt.code, r.code, "%s: %s", path, r.body)
				}
			}
		})
	}
}

// TestGuardHostOnlyOnLoopback: a handler reached through no loopback listener (here, no listener
// at all) answers any Host: exposed servers are protected by their token instead.
func TestGuardHostOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := httptest.NewRequest("GET", "/api", nil)
	r.Host = "opemu.example.com"
	w := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(w, r)
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
}

func TestGuardCrossOriginWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.AllowedOrigins = []string{"http://localhost:5173"} })
	own := e.http.URL // http://127.0.0.1:port
	json := map[string]string{"Content-Type": "application/json"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range json {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	tests := []struct {
		name   string
		header map[string]string
		code   int
	}{
		{name: "curl: no Origin", header: json, code: 201},
		{name: "curl: no Content-Type is JSON, as in Kubernetes", header: nil, code: 201},
		{name: "the server's own page", header: with(map[string]string{"Origin": own, "Sec-Fetch-Site": "same-origin"}), code: 201},
		{name: "the own origin, scheme in capitals", header: with(map[string]string{"Origin": strings.ToUpper(own[:4]) + own[4:]}), code: 201},
		{name: "a page on another port", header: with(map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-site"}), code: 403},
		{name: "a page on another site", header: with(map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}), code: 403},
		{name: "an opaque origin", header: with(map[string]string{"Origin": "null"}), code: 403},
		{name: "a typeless blob from another site", header: map[string]string{"Origin": "http://evil.example"}, code: 403},
		{name: "text/plain from another site", header: map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, code: 403},
		{name: "Sec-Fetch-Site cross-site without Origin", header: with(map[string]string{"Sec-Fetch-Site": "cross-site"}), code: 403},
		{name: "Sec-Fetch-Site same-site without Origin", header: with(map[string]string{"Sec-Fetch-Site": "same-site"}), code: 403},
		{name: "an allowed origin", header: with(map[string]string{"Origin": "http://localhost:5173", "Sec-Fetch-Site": "cross-site"}), code: 201},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.names(t)
			name := "app-" + string(rune('a'+i))
			r := e.send(req{method: "POST", path: appsPath, header: tt.header, body: app(name, 1, "nginx:1")})
			if tt.code == 403 {
				m := status(t, r, 403, "Forbidden")
				assert.Contains(t, m["message"], "ALLOWED_ORIGINS=")
				assert.Equal(t, before, e.names(t), "nothing stored")
			} else {
				assert.Equal(t, tt.code, r.code, "body: %s", r.body)
				assert.Contains(t, e.names(t), name)
			}
		})
	}

	// Every other write method is refused alike, and reads are not.
	status(t, e.send(req{method: "DELETE", path: appsPath + "/app-a", header: map[string]string{"Origin": "http://evil.example"}}), 403, "Forbidden")
	status(t, e.send(req{method: "PATCH", path: appsPath + "/app-a", header: map[string]string{"Origin": "http://evil.example", "Content-Type": "application/merge-patch+json"}, body: `{}`}), 403, "Forbidden")
	status(t, e.send(req{method: "PUT", path: appsPath + "/app-a", header: map[string]string{"Origin": "http://evil.example"}, body: app("app-a", 2, "nginx:1")}), 403, "Forbidden")
	status(t, e.send(req{method: "POST", path: "/validate", header: map[string]string{"Origin": "http://evil.example"}, body: `{}`}), 403, "Forbidden")
	assert.Contains(t, e.names(t), "app-a")
	get := e.send(req{method: "GET", path: appsPath, header: map[string]string{"Origin": "http://evil.example"}})
	assert.Equal(t, 200, get.code)
	assert.Empty(t, get.header.Get("Access-Control-Allow-Origin"), "no CORS for an origin not configured")
}

func TestGuardCORS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.AllowedOrigins = []string{"http://localhost:5173"} })
	preflight := func(origin string) response {
		return e.send(req{method: "OPTIONS", path: appsPath + "/x", header: map[string]string{
			"Origin": origin, "Access-Control-Request-Method": "DELETE", "Access-Control-Request-Headers": "authorization,content-type",
		}})
	}
	ok := preflight("http://localhost:5173")
	require.Equal(t, http.StatusNoContent, ok.code, "body: %s", ok.body)
	assert.Equal(t, "http://localhost:5173", ok.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "true", ok.header.Get("Access-Control-Allow-Credentials"))
	assert.Contains(t, ok.header.Get("Access-Control-Allow-Methods"), "DELETE")
	assert.Equal(t, "authorization,content-type", ok.header.Get("Access-Control-Allow-Headers"))
	assert.Contains(t, ok.header.Values("Vary"), "Origin")

	refused := preflight("http://evil.example")
	m := status(t, refused, 403, "Forbidden")
	assert.Contains(t, m["message"], "ALLOWED_ORIGINS=http://evil.example")
	assert.Empty(t, refused.header.Get("Access-Control-Allow-Origin"))

	get := e.send(req{method: "GET", path: "/api", header: map[string]string{"Origin": "http://localhost:5173"}})
	assert.Equal(t, "http://localhost:5173", get.header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, get.header.Get("Access-Control-Expose-Headers"), "Warning")

	// Without ALLOWED_ORIGINS nobody gets CORS headers, and every response says no framing and
	// no sniffing.
	plain := newEnv(t)
	r := plain.send(req{method: "OPTIONS", path: appsPath, header: map[string]string{"Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST"}})
	status(t, r, 403, "Forbidden")
	assert.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
	api := plain.send(req{method: "GET", path: "/api"})
	assert.Empty(t, api.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "nosniff", api.header.Get("X-Content-Type-Options"))
	assert.Equal(t, "DENY", api.header.Get("X-Frame-Options"))
}

func tokenFile(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func withTokens(t testing.TB) func(*server.Config, *cache.Config) {
	tokens := server.NewTokens()
	require.NoError(t, server.ReadTokenFile(tokenFile(t, "alice-token,alice,1001,\"developers,ops\"\nbob-token,bob,1002\n"), tokens))
	return func(c *server.Config, _ *cache.Config) { c.Tokens, c.PProf = tokens, true }
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

func TestGuardTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withTokens(t))
	for _, path := range []string{"/", "/api", "/apis", appsPath, "/version", "/metrics", "/events", "/leader", "/crds",
		"/watch", "/ui/app.js", "/debug/pprof/", "/openapi/v3", "/no/such/route"} {
		m := status(t, e.send(req{method: "GET", path: path}), 401, "Unauthorized")
		assert.Equal(t, "Unauthorized", m["message"], path)
		status(t, e.send(req{method: "GET", path: path, header: bearer("wrong")}), 401, "Unauthorized")
	}
	for _, path := range []string{"/healthz", "/readyz", "/livez"} {
		assert.Equal(t, 200, e.send(req{method: "GET", path: path}).code, path)
	}
	status(t, e.send(req{method: "POST", path: appsPath, header: map[string]string{"Content-Type": "application/json"}, body: app("web", 1, "nginx:1")}), 401, "Unauthorized")
	assert.Empty(t, e.names(t))

	for _, h := range []map[string]string{bearer("alice-token"), {"Authorization": "bearer bob-token"}, {"Authorization": "  Bearer   alice-token "}} {
		assert.Equal(t, 200, e.send(req{method: "GET", path: "/api", header: h}).code, h)
	}
	assert.Equal(t, 200, e.send(req{method: "GET", path: "/debug/pprof/", header: bearer("bob-token")}).code)
	status(t, e.send(req{method: "GET", path: "/api", header: map[string]string{"Authorization": "Basic YWxpY2U6eA=="}}), 401, "Unauthorized")

	// The user who wrote is the write path's Event source.
	h := bearer("alice-token")
	h["Content-Type"] = "application/json"
	require.Equal(t, 201, e.send(req{method: "POST", path: appsPath, header: h, body: app("web", 1, "nginx:1")}).code)
	evs := e.send(req{method: "GET", path: "/api/v1/namespaces/default/events?fieldSelector=reason%3DCreated", header: bearer("bob-token")})
	require.Equal(t, 200, evs.code, "body: %s", evs.body)
	items := evs.json(t)["items"].([]any)
	require.Len(t, items, 1)
	assert.Equal(t, "alice", field(items[0].(map[string]any), "source", "component"))
}

func TestDashboardLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withTokens(t))
	own := e.http.URL

	// The page sends a browser without credentials to the prompt; its assets are refused.
	r := e.send(req{method: "GET", path: "/ui/"})
	require.Equal(t, http.StatusSeeOther, r.code)
	assert.Equal(t, "/ui/login", r.header.Get("Location"))
	login := e.send(req{method: "GET", path: "/ui/login"})
	require.Equal(t, 200, login.code)
	assert.Contains(t, string(login.body), `name="token"`)

	// A wrong token: back to the prompt, no cookie.
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": own, "Sec-Fetch-Site": "same-origin"}
	bad := e.send(req{method: "POST", path: "/ui/login", header: form, body: "token=nope"})
	require.Equal(t, http.StatusSeeOther, bad.code)
	assert.Equal(t, "/ui/login?failed=1", bad.header.Get("Location"))
	assert.Empty(t, bad.header.Get("Set-Cookie"))

	// Another origin cannot log the browser in (login CSRF).
	status(t, e.send(req{method: "POST", path: "/ui/login", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}, body: "token=alice-token"}), 403, "Forbidden")

	good := e.send(req{method: "POST", path: "/ui/login", header: form, body: "token=" + url.QueryEscape("alice-token")})
	require.Equal(t, http.StatusSeeOther, good.code)
	assert.Equal(t, "/ui/", good.header.Get("Location"))
	cookies := (&http.Response{Header: good.header}).Cookies()
	require.Len(t, cookies, 1)
	ck := cookies[0]
	assert.True(t, ck.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	assert.Equal(t, "/", ck.Path)
	assert.NotContains(t, ck.Value, "alice-token", "the cookie holds no bearer token")
	cookie := ck.Name + "=" + ck.Value

	// The cookie authenticates the dashboard's own requests, the page and its stream included.
	for _, path := range []string{"/ui/", "/ui/app.js", "/api", "/metrics"} {
		assert.Equal(t, 200, e.send(req{method: "GET", path: path, header: map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-origin"}}).code, path)
	}
	assert.Equal(t, 200, e.send(req{method: "GET", path: "/ui/", header: map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "none"}}).code, "a typed URL")
	assert.Equal(t, 200, e.send(req{method: "GET", path: "/api", header: map[string]string{"Cookie": cookie}}).code, "a browser that sends no Sec-Fetch-Site")
	w := e.send(req{method: "POST", path: appsPath, header: map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-origin", "Origin": own, "Content-Type": "application/json"}, body: app("from-ui", 1, "nginx:1")})
	assert.Equal(t, 201, w.code, "body: %s", w.body)

	// ... but not a request another page sends (SameSite=Strict does not separate ports).
	for _, h := range []map[string]string{
		{"Cookie": cookie, "Sec-Fetch-Site": "same-site"},
		{"Cookie": cookie, "Sec-Fetch-Site": "cross-site"},
		{"Cookie": cookie, "Origin": "http://127.0.0.1:1"},
		{"Cookie": "opemu_session_1=" + ck.Value, "Sec-Fetch-Site": "same-origin"},
		{"Cookie": ck.Name + "=forged", "Sec-Fetch-Site": "same-origin"},
	} {
		status(t, e.send(req{method: "GET", path: "/api", header: h}), 401, "Unauthorized")
	}

	// The URL opemu logs with a generated token: the cookie is set and the token leaves the URL.
	u := e.send(req{method: "GET", path: "/ui/?token=bob-token"})
	require.Equal(t, http.StatusSeeOther, u.code)
	assert.Equal(t, "/ui/", u.header.Get("Location"))
	assert.Contains(t, u.header.Get("Set-Cookie"), "HttpOnly")
	wrong := e.send(req{method: "GET", path: "/ui/?token=nope"})
	require.Equal(t, http.StatusSeeOther, wrong.code)
	assert.Equal(t, "/ui/login?failed=1", wrong.header.Get("Location"))
}

// TestDashboardSession: the dashboard's cookie is a session, not a stand-in for the token: random
// at each login, HttpOnly, SameSite=Strict, good only on the listener that opened it (a browser
// sends it to every port of the host) and for 12 hours.
func TestDashboardSession(t *testing.T) {
	t.Parallel()
	tokens := withTokens(t)
	e := newEnv(t, tokens)
	login := func(e *env) *http.Cookie {
		t.Helper()
		r := e.send(req{method: "POST", path: "/ui/login", body: "token=alice-token",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": e.http.URL, "Sec-Fetch-Site": "same-origin"}})
		require.Equal(t, http.StatusSeeOther, r.code)
		cookies := (&http.Response{Header: r.header}).Cookies()
		require.Len(t, cookies, 1)
		return cookies[0]
	}
	works := func(e *env, name, value string) bool {
		t.Helper()
		return e.send(req{method: "GET", path: "/api", header: map[string]string{"Cookie": name + "=" + value, "Sec-Fetch-Site": "same-origin"}}).code == 200
	}

	a, b := login(e), login(e)
	assert.NotEqual(t, a.Value, b.Value, "each login is a new session, not a digest of the token")
	assert.GreaterOrEqual(t, len(a.Value), 43, "at least 256 random bits")
	for _, ck := range []*http.Cookie{a, b} {
		assert.True(t, ck.HttpOnly)
		assert.Equal(t, http.SameSiteStrictMode, ck.SameSite)
		assert.Equal(t, "/", ck.Path)
		assert.Equal(t, 12*60*60, ck.MaxAge, "the session ends after 12 hours, and the browser's cookie with it")
		assert.True(t, works(e, ck.Name, ck.Value))
	}

	// Another listener of the same server: its own cookie name, and this session is not good there.
	other := *e
	other.http = httptest.NewServer(e.srv.Handler())
	t.Cleanup(other.http.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(other.http.URL, "http://"))
	require.NoError(t, err)
	assert.False(t, works(&other, "opemu_session_"+port, a.Value), "a session is bound to its listener")
	assert.False(t, works(&other, a.Name, a.Value), "a session is bound to its listener")
	o := login(&other)
	assert.True(t, works(&other, o.Name, o.Value))
	assert.False(t, works(e, a.Name, o.Value))

	// Another server with the same token (or this one restarted) does not know the session.
	again := newEnv(t, tokens)
	_, port, err = net.SplitHostPort(strings.TrimPrefix(again.http.URL, "http://"))
	require.NoError(t, err)
	assert.False(t, works(again, "opemu_session_"+port, a.Value))
}

func TestReadTokenFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		file    string
		err     string
		token   string
		user    server.User
		unknown string
	}{
		{name: "groups", file: "t1,alice,1001,\"developers,ops\"\n", token: "t1",
			user: server.User{Name: "alice", UID: "1001", Groups: []string{"developers", "ops", "system:authenticated"}}},
		{name: "no groups", file: "t1,alice,1001\n", token: "t1", user: server.User{Name: "alice", UID: "1001", Groups: []string{"system:authenticated"}}},
		{name: "an empty token is skipped", file: ",nobody,0\nt2,bob,2\n", token: "t2", unknown: "",
			user: server.User{Name: "bob", UID: "2", Groups: []string{"system:authenticated"}}},
		{name: "the later record of a token wins", file: "t1,alice,1\nt1,carol,3\n", token: "t1",
			user: server.User{Name: "carol", UID: "3", Groups: []string{"system:authenticated"}}},
		{name: "too few columns", file: "t1,alice\n", err: "at least 3 columns"},
		{name: "bad CSV", file: "t1,\"alice,1\n", err: "token file"},
		{name: "a token with a space", file: "t 1,alice,1\n", err: "white space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tokens := server.NewTokens()
			err := server.ReadTokenFile(tokenFile(t, tt.file), tokens)
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			u, ok := tokens.Authenticate(tt.token)
			require.True(t, ok)
			assert.Equal(t, tt.user, u)
			_, ok = tokens.Authenticate(tt.token + "x")
			assert.False(t, ok)
			_, ok = tokens.Authenticate("")
			assert.False(t, ok)
		})
	}
	assert.Error(t, server.ReadTokenFile(filepath.Join(t.TempDir(), "missing"), server.NewTokens()))
}

func TestUserFrom(t *testing.T) {
	t.Parallel()
	_, ok := server.UserFrom(context.Background())
	assert.False(t, ok)
	u := server.User{Name: "alice"}
	got, ok := server.UserFrom(server.WithUser(context.Background(), u))
	assert.True(t, ok)
	assert.Equal(t, u, got)
}

// TestManagerFromUserAgent: an update without fieldManager is recorded under the User-Agent's
// product, as kube-apiserver records it, not under the authenticated user.
func TestManagerFromUserAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withTokens(t))
	h := bearer("alice-token")
	h["Content-Type"] = applyType
	require.Equal(t, 201, e.send(req{method: "PATCH", path: appsPath + "/web?fieldManager=apply-tool", header: h, body: applied}).code)
	h["Content-Type"] = "application/merge-patch+json"
	h["User-Agent"] = "my-controller/v1.2 (linux/amd64) kubernetes/abc"
	r := e.send(req{method: "PATCH", path: appsPath + "/web", header: h, body: `{"spec":{"replicas":5}}`})
	require.Equal(t, 200, r.code, "body: %s", r.body)
	var managers []string
	for _, m := range field(r.json(t), "metadata", "managedFields").([]any) {
		managers = append(managers, m.(map[string]any)["manager"].(string))
	}
	assert.ElementsMatch(t, []string{"apply-tool", "my-controller"}, managers)
}

func TestGuardRejectsBadOrigins(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"localhost:5173", "ftp://x", "http://x/path", "null", "*", "http://"} {
		_, err := server.ParseOrigin(bad)
		assert.Error(t, err, bad)
	}
	o, err := server.ParseOrigin("HTTP://LocalHost:80/")
	require.NoError(t, err)
	assert.Equal(t, "http://localhost", o)
}
