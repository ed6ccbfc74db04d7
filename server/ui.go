package server

import (
	"embed"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
)

// The dashboard (SPEC §4.1 /ui/): plain HTML, CSS and JavaScript embedded in the binary, using
// only the public API.

//go:embed ui
var uiFiles embed.FS

const (
	dashboardPath = "/ui/"
	// loginPath serves the dashboard's token prompt when tokens are configured (SPEC §13).
	loginPath = "/ui/login"
)

func (s *Server) uiRoutes() {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui/
	}
	files := http.StripPrefix(dashboardPath, http.FileServer(http.FS(sub)))
	s.echo.GET("/ui", func(c *echo.Context) error { return c.Redirect(http.StatusMovedPermanently, dashboardPath) }, securityHeaders(dashboardCSP))
	s.echo.GET("/ui/*", echo.WrapHandler(files), securityHeaders(dashboardCSP))
	s.echo.GET(loginPath, s.loginPage, securityHeaders(loginCSP))
	s.echo.POST(loginPath, s.login, securityHeaders(loginCSP))
}

// The dashboard must not be framed (its Delete button clicked through from another site), nor
// run anything but its own files: it loads nothing external, has no inline script or style,
// and talks only to this server. The login page is one self-contained file whose small inline
// style and script are its own.
const (
	dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
		"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	loginCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
		"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

// securityHeaders sets the dashboard's Content-Security-Policy, X-Frame-Options: DENY (for
// browsers without frame-ancestors) and nosniff on a route's answers. (No Referrer-Policy of
// no-referrer: a browser then sends "Origin: null" with the login form, which the request
// guard refuses as cross-site.)
func securityHeaders(csp string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			h := c.Response().Header()
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Frame-Options", "DENY")
			h.Set("X-Content-Type-Options", "nosniff")
			return next(c)
		}
	}
}

// isDashboardPage reports whether r asks for the dashboard's page (or for / from a browser,
// which is sent there), where a browser without credentials is sent to the login instead of
// getting a 401 Status.
func isDashboardPage(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	switch r.URL.Path {
	case "/ui", dashboardPath, dashboardPath + "index.html":
		return true
	case "/":
		return wantsHTML(r)
	}
	return false
}

// wantsHTML reports whether r is a browser's navigation: its Accept names text/html (curl,
// kubectl and client-go send */* or JSON).
func wantsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/html") {
			return true
		}
	}
	return false
}

// loginPage serves the token prompt. Without tokens there is nothing to log in to.
func (s *Server) loginPage(c *echo.Context) error {
	if s.cfg.Tokens == nil {
		return c.Redirect(http.StatusSeeOther, dashboardPath)
	}
	page, err := fs.ReadFile(uiFiles, "ui/login.html")
	if err != nil {
		return err
	}
	return c.HTMLBlob(http.StatusOK, page)
}

// login takes the prompt's form post (token=...): a valid token opens a session, whose cookie
// the browser keeps. The guard has already refused posts from other origins.
func (s *Server) login(c *echo.Context) error {
	if s.cfg.Tokens == nil {
		return c.Redirect(http.StatusSeeOther, dashboardPath)
	}
	u, ok := s.cfg.Tokens.Authenticate(c.Request().PostFormValue("token"))
	if !ok {
		return c.Redirect(http.StatusSeeOther, loginPath+"?failed=1")
	}
	s.startSession(c, u)
	return c.Redirect(http.StatusSeeOther, dashboardPath)
}

// cookieName names the dashboard's cookie after the server's port: browsers share cookies
// between the ports of one host, and two opemu servers there each keep their own session.
func cookieName(r *http.Request) string {
	_, port, err := net.SplitHostPort(r.Host)
	if err != nil || port == "" {
		port = "80"
		if r.TLS != nil {
			port = "443"
		}
	}
	return "opemu_session_" + port
}

// startSession opens a session of u on the request's listener and sets its cookie: HttpOnly (no
// script reads it), SameSite=Strict (no other site's request carries it), Secure over HTTPS,
// for the session's lifetime.
func (s *Server) startSession(c *echo.Context, u User) {
	r := c.Request()
	c.SetCookie(&http.Cookie{
		Name: cookieName(r), Value: s.sessions.open(u, listenerOf(r).addr), Path: "/",
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}
