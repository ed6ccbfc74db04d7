package server

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v5"
	"k8s.io/apimachinery/pkg/version"
)

// /version (SPEC §4.2): the Kubernetes release whose API opemu serves, in kube-apiserver's
// fields. The installed kubectl (a 1.32 "dispatcher" that runs a kubectl of the server's minor
// version when it has one) keeps using its own 1.32 client for a 1.37 server, as with a real
// 1.37 cluster.

// apiModule is the module whose version names the Kubernetes release served: k8s.io/api
// v0.37.2 is Kubernetes v1.37.2.
const apiModule = "k8s.io/api"

// fallbackRelease is the release reported when the binary carries no module versions.
const fallbackRelease = "v1.37.2"

// kubeVersion is what /version answers, read once from the binary's build information: the
// release from apiModule's version, the commit, tree state and date from the version control
// stamp of opemu's build (Go's module cache builds carry none: kube-apiserver's defaults then).
var kubeVersion = sync.OnceValue(func() version.Info {
	v := version.Info{GitVersion: fallbackRelease, GitTreeState: "clean", BuildDate: "1970-01-01T00:00:00Z",
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == apiModule {
				if rel, ok := releaseOf(d.Version); ok {
					v.GitVersion = rel
				}
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.GitCommit = s.Value
			case "vcs.time":
				v.BuildDate = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					v.GitTreeState = "dirty"
				}
			}
		}
	}
	major, minor, _ := parseRelease(v.GitVersion)
	v.Major, v.Minor = strconv.Itoa(major), strconv.Itoa(minor)
	v.EmulationMajor, v.EmulationMinor = v.Major, v.Minor
	v.MinCompatibilityMajor, v.MinCompatibilityMinor = v.Major, strconv.Itoa(minor-1)
	return v
})

// releaseOf turns a k8s.io staging module's version (v0.37.2) into the Kubernetes release
// (v1.37.2).
func releaseOf(moduleVersion string) (string, bool) {
	rest, ok := strings.CutPrefix(moduleVersion, "v0.")
	if !ok {
		return "", false
	}
	rel := "v1." + rest
	if _, _, ok := parseRelease(rel); !ok {
		return "", false
	}
	return rel, true
}

// parseRelease reads the major and minor of a release "v1.37.2".
func parseRelease(rel string) (major, minor int, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(rel, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(parts[0])
	minor, err2 = strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

func (s *Server) version(c *echo.Context) error { return c.JSON(http.StatusOK, kubeVersion()) }
