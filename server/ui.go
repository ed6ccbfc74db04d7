package server

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v5"
)

// The dashboard (SPEC §4.1 /ui/): plain HTML, CSS and JavaScript embedded in the binary, using
// only the public API.

//go:embed ui
var uiFiles embed.FS

func (s *Server) uiRoutes() {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui/
	}
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
	s.echo.GET("/ui", func(c *echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") })
	s.echo.GET("/ui/*", echo.WrapHandler(files))
}
