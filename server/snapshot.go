package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/snapshot"
)

// Snapshots (SPEC §23): the server's whole state saved (POST /snapshot) and restored (POST
// /snapshot/restore). POST for both: taking one is an action (it reads everything at one
// version), and the request guard holds writes to a same-origin page.

// Snapshots takes and restores the server's state; app implements it.
type Snapshots interface {
	Snapshot(ctx context.Context) (*snapshot.Snapshot, error)
	Restore(ctx context.Context, s *snapshot.Snapshot, opts snapshot.RestoreOptions) (snapshot.Restored, error)
}

const (
	snapshotPath        = "/snapshot"
	snapshotRestorePath = "/snapshot/restore"
	// snapshotBodyFactor is how many times MAX_BODY a snapshot to restore may be: a cluster's
	// state, not one object.
	snapshotBodyFactor = 64
)

// snapshotMediaTypes are the bodies /snapshot/restore takes (both are YAML streams to it).
const snapshotMediaTypes = "application/yaml, application/json"

// takeSnapshot serves POST /snapshot[?format=yaml|json]: the state as a YAML stream kubectl
// apply also takes (package snapshot), offered as a file to save.
func (s *Server) takeSnapshot(c *echo.Context) error {
	format, err := snapshot.ParseFormat(c.QueryParam("format"))
	if err != nil {
		return badRequest("%v", err)
	}
	if s.cfg.Snapshots == nil {
		return snapshotsDisabled()
	}
	snap, err := s.cfg.Snapshots.Snapshot(c.Request().Context())
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := snapshot.Write(&out, snap, format); err != nil {
		return err
	}
	name := fmt.Sprintf("opemu-snapshot-%s.%s", snap.Clock.UTC().Format("20060102-150405"), format)
	c.Response().Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	return c.Blob(http.StatusOK, "application/yaml", out.Bytes())
}

// restoreSnapshot serves POST /snapshot/restore[?clock=false]: the body is a snapshot (opemu's,
// or any YAML or JSON stream of objects); the server's state becomes it. The answer says what
// was restored (snapshot.Restored). clock=false leaves a manual clock where it is.
func (s *Server) restoreSnapshot(c *echo.Context) error {
	switch mediaType(c.Request()) {
	case "", "application/yaml", "application/x-yaml", "text/yaml", "application/json", "*/*":
	default:
		return registry.UnsupportedMediaType(snapshotMediaTypes)
	}
	setClock, err := queryBoolPtr(c.Request().URL.Query(), "clock")
	if err != nil {
		return err
	}
	if s.cfg.Snapshots == nil {
		return snapshotsDisabled()
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	// Its YAML documents' aliases may expand them to at most twice the body's limit in all.
	snap, err := snapshot.ReadLimited(bytes.NewReader(body), 2*int(s.cfg.MaxBody)*snapshotBodyFactor)
	if err != nil {
		return err
	}
	res, err := s.cfg.Snapshots.Restore(c.Request().Context(), snap, snapshot.RestoreOptions{KeepClock: setClock != nil && !*setClock})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func snapshotsDisabled() error {
	return apierrors.NewServiceUnavailable("this server takes and restores no snapshots")
}
