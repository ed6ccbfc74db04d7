package image

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// built is the image TestMain builds with deploy/image.sh for this machine's architecture
// (IMAGE-ARCH, tagged IMAGE too), before the tests' timeout starts: with a cold Go build cache
// the static build compiles everything again (15 minutes were measured on the two shared cores
// at a load of 20; warm, it takes seconds).
var built struct {
	image string
	out   []byte // what the build printed
	err   error  // why it failed; errNotBuilt when podman is missing (the test says so)
}

var errNotBuilt = fmt.Errorf("not built: podman is not installed")

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	flag.Parse()
	if flag.Lookup("test.list").Value.String() != "" {
		return m.Run() // listing runs no test: nothing to build
	}
	built.image = fmt.Sprintf("localhost/opemu-test-%d:dev", os.Getpid())
	built.err = errNotBuilt
	if _, err := exec.LookPath("podman"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "deploy/image.sh")
		cmd.Dir, _ = filepath.Abs("../..") // the repository's root
		cmd.Env = append(os.Environ(), "IMAGE="+built.image, "PLATFORMS=linux/"+runtime.GOARCH)
		cmd.WaitDelay = 5 * time.Second
		built.out, built.err = cmd.CombinedOutput()
		cancel()
		defer func() {
			if out, err := exec.Command("podman", "rmi", "-f", built.image, built.image+"-"+runtime.GOARCH).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "podman rmi %s: %v\n%s", built.image, err, out)
			}
		}()
	}
	return m.Run()
}
