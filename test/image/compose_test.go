package image

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/tool"
)

// The demo's election and rollout timings, short so that a failover takes seconds (the
// compose file's defaults are opemu's: 15 s, 10 s, 2 s, 1 s).
const (
	leaseDuration = 2 * time.Second
	retryPeriod   = 250 * time.Millisecond
)

// client bounds every request the test sends; a replica that does not answer within it counts
// as not answering.
var client = &http.Client{Timeout: 3 * time.Second}

const appsPath = "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"

// demo is one run of the compose demo: its project, its image and the replicas' addresses.
type demo struct {
	t        *testing.T
	repo     string
	env      []string          // podman's and podman-compose's environment
	project  string            // podman-compose -p
	replicas map[string]string // service (= POD_NAME) → host:port
}

// run runs a command of the demo (podman or podman-compose) in the repository's root, bounded
// by timeout, and returns its combined output; a failure or a timeout fails the test.
func (d *demo) run(timeout time.Duration, name string, args ...string) string {
	d.t.Helper()
	out, err := d.try(timeout, name, args...)
	require.NoError(d.t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return out
}

// try is run without failing the test.
func (d *demo) try(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = d.repo
	cmd.Env = d.env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (d *demo) compose(timeout time.Duration, args ...string) string {
	d.t.Helper()
	return d.run(timeout, "podman-compose", append([]string{"-p", d.project, "-f", "deploy/compose/compose.yaml"}, args...)...)
}

func (d *demo) url(replica, path string) string { return "http://" + d.replicas[replica] + path }

// get returns the status and JSON object at path on a replica (0 when it does not answer).
func (d *demo) get(replica, path string) (int, map[string]any) {
	resp, err := client.Get(d.url(replica, path))
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var obj map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&obj)
	return resp.StatusCode, obj
}

// leader returns who the replica says leads ("" when it does not answer or knows none).
func (d *demo) leader(replica string) string {
	_, obj := d.get(replica, "/leader")
	l, _ := obj["leader"].(string)
	return l
}

// agreedLeader waits until every replica of among names the same leader, one of them, and
// returns it and how long that took.
func (d *demo) agreedLeader(within time.Duration, among ...string) (string, time.Duration) {
	d.t.Helper()
	start := time.Now()
	var leader string
	require.Eventually(d.t, func() bool {
		leader = d.leader(among[0])
		for _, r := range among[1:] {
			if d.leader(r) != leader {
				return false
			}
		}
		for _, r := range among {
			if r == leader {
				return true
			}
		}
		return false
	}, within, 20*time.Millisecond, "replicas %v agree on a leader among them", among)
	return leader, time.Since(start)
}

// app returns an Application's uid, phase and ready replicas as a replica serves it.
func (d *demo) app(replica, name string) (uid, phase string, ready float64) {
	code, obj := d.get(replica, appsPath+"/"+name)
	if code != http.StatusOK {
		return "", "", 0
	}
	uid, _ = obj["metadata"].(map[string]any)["uid"].(string)
	st, _ := obj["status"].(map[string]any)
	phase, _ = st["phase"].(string)
	ready, _ = st["readyReplicas"].(float64)
	return uid, phase, ready
}

// create creates Application name with n replicas through a replica.
func (d *demo) create(replica, name string, n int) {
	d.t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q},"spec":{"replicas":%d,"image":"nginx:1.27"}}`, name, n)
	resp, err := client.Post(d.url(replica, appsPath), "application/json", strings.NewReader(body))
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(d.t, http.StatusCreated, resp.StatusCode, "create %s through %s: %s", name, replica, b)
}

// waitRunning waits until Application name is Running with n ready replicas on a replica.
func (d *demo) waitRunning(replica, name string, n int, within time.Duration) {
	d.t.Helper()
	var phase string
	var ready float64
	require.Eventually(d.t, func() bool {
		_, phase, ready = d.app(replica, name)
		return phase == "Running" && ready == float64(n)
	}, within, 50*time.Millisecond, "%s reaches Running with %d ready (last seen through %s: %q, %v)", name, n, replica, phase, ready)
}

// readyBy returns who recorded the Ready Events of Application name (their source.host).
func (d *demo) readyBy(replica, name string) []string {
	_, obj := d.get(replica, "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name="+name+",reason=Ready")
	items, _ := obj["items"].([]any)
	var hosts []string
	for _, it := range items {
		src, _ := it.(map[string]any)["source"].(map[string]any)
		h, _ := src["host"].(string)
		hosts = append(hosts, h)
	}
	return hosts
}

// container returns the name of the container of a service of the demo.
func (d *demo) container(service string) string {
	d.t.Helper()
	out := strings.Fields(d.run(30*time.Second, "podman", "ps", "--filter", "label=io.podman.compose.project="+d.project,
		"--filter", "label=com.docker.compose.service="+service, "--format", "{{.Names}}"))
	require.Len(d.t, out, 1, "one container runs service %s", service)
	return out[0]
}

// freePorts picks n free ports on 127.0.0.1.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ports = append(ports, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		require.NoError(t, ln.Close())
	}
	return ports
}

// TestComposeDemoFailsOver is the README's compose demo, as a new user runs it from a fresh
// clone: deploy/image.sh builds the image (this machine's architecture, in TestMain) with
// podman, pulling nothing; the image is the static binary on scratch, run as a numeric non-root
// user, listening on 0.0.0.0:3000 by default, with OCI labels. podman-compose starts
// deploy/compose/compose.yaml (opemu etcd and three replicas on a network of their own,
// published on 127.0.0.1): an Application created through a follower is reconciled by the
// leader; the leader's container is killed mid-rollout; another replica takes over and
// finishes the rollout; nothing is lost.
func TestComposeDemoFailsOver(t *testing.T) {
	tool.Path(t, "podman")
	tool.Path(t, "podman-compose")
	tool.Path(t, "runc")
	tool.At(t, "/usr/lib/cni/dnsname", "golang-github-containernetworking-plugin-dnsname")
	repo := tool.Repo(t)
	require.NoError(t, built.err, "bash deploy/image.sh:\n%s", built.out)
	image := built.image
	ports := freePorts(t, 4)
	d := &demo{t: t, repo: repo, project: fmt.Sprintf("opemu-test-%d", os.Getpid()),
		replicas: map[string]string{"opemu-1": "127.0.0.1:" + ports[0], "opemu-2": "127.0.0.1:" + ports[1], "opemu-3": "127.0.0.1:" + ports[2]}}
	d.env = append(os.Environ(),
		"CONTAINERS_CONF="+filepath.Join(repo, "deploy/compose/containers.conf"), "OPEMU_IMAGE="+image,
		"OPEMU_PORT_1="+ports[0], "OPEMU_PORT_2="+ports[1], "OPEMU_PORT_3="+ports[2], "ETCD_PORT="+ports[3],
		"LEASE_DURATION="+leaseDuration.String(), "RENEW_DEADLINE=1500ms", "RETRY_PERIOD="+retryPeriod.String(), "ROLLOUT_STEP=400ms")

	var inspected []struct {
		Architecture string
		Size         int64
		Config       struct {
			User       string
			Env        []string
			Entrypoint []string
			Labels     map[string]string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(d.run(time.Minute, "podman", "image", "inspect", image)), &inspected))
	require.Len(t, inspected, 1)
	img := inspected[0]
	t.Logf("image %s: %s, %.1f MB", image, img.Architecture, float64(img.Size)/1e6)
	assert.Equal(t, runtime.GOARCH, img.Architecture)
	assert.Equal(t, "65532:65532", img.Config.User, "a numeric non-root user")
	assert.Contains(t, img.Config.Env, "ADDR=0.0.0.0:3000")
	assert.Equal(t, []string{"/opemu"}, img.Config.Entrypoint)
	assert.Equal(t, "opemu", img.Config.Labels["org.opencontainers.image.title"])
	assert.NotEmpty(t, img.Config.Labels["org.opencontainers.image.source"])
	assert.NotEqual(t, "unknown", img.Config.Labels["org.opencontainers.image.revision"], "the commit it was built from")
	// The binary and an empty /tmp, nothing else: a base image slipping in would show here.
	assert.Less(t, img.Size, int64(100e6), "the image is the static binary and nothing else")

	// The demo, until the test ends; then its containers and its network go (podman-compose
	// 1.0.3's down leaves the network).
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range []string{"etcd", "opemu-1", "opemu-2", "opemu-3"} {
				out, _ := d.try(time.Minute, "podman", "logs", "--tail", "30", d.project+"_"+s+"_1")
				t.Logf("%s's last log lines:\n%s", s, out)
			}
		}
		if out, err := d.try(2*time.Minute, "podman-compose", "-p", d.project, "-f", "deploy/compose/compose.yaml", "down", "-t", "2"); err != nil {
			t.Errorf("podman-compose down: %v\n%s", err, out)
		}
		if out, err := d.try(time.Minute, "podman", "network", "rm", "-f", d.project+"_default"); err != nil {
			t.Errorf("podman network rm: %v\n%s", err, out)
		}
	})
	d.compose(2*time.Minute, "up", "-d")
	for r := range d.replicas {
		require.Eventually(t, func() bool { code, _ := d.get(r, "/version"); return code == http.StatusOK },
			60*time.Second, 50*time.Millisecond, "%s serves the API (it has reached etcd)", r)
	}
	all := []string{"opemu-1", "opemu-2", "opemu-3"}
	leader, _ := d.agreedLeader(15*time.Second, all...)
	var followers []string
	for _, r := range all {
		if r != leader {
			followers = append(followers, r)
		}
	}

	// Created through a follower, reconciled by the leader, seen by every replica.
	d.create(followers[0], "web", 2)
	d.waitRunning(followers[1], "web", 2, 20*time.Second)
	webUID, _, _ := d.app(leader, "web")
	require.Eventually(t, func() bool { h := d.readyBy(followers[0], "web"); return len(h) == 1 && h[0] == leader },
		5*time.Second, 50*time.Millisecond, "the leader (%s) reconciled web", leader)

	// The leader's container killed mid-rollout: another replica leads and finishes it.
	d.create(followers[0], "big", 40)
	require.Eventually(t, func() bool { _, _, ready := d.app(followers[0], "big"); return ready > 0 },
		20*time.Second, 20*time.Millisecond, "the rollout of big begins")
	_, _, readyAtKill := d.app(followers[0], "big")
	require.Less(t, readyAtKill, 40.0, "still rolling out when the leader goes")
	d.run(time.Minute, "podman", "kill", "--signal", "KILL", d.container(leader))
	// SPEC §8's bound (LEASE_DURATION + 4.4 × RETRY_PERIOD) with room for two loaded cores.
	next, took := d.agreedLeader(leaseDuration+time.Duration(4.4*float64(retryPeriod))+10*time.Second, followers...)
	t.Logf("the container of %s killed with %v of 40 ready: %s leads after %v", leader, readyAtKill, next, took)
	d.waitRunning(followers[1], "big", 40, 30*time.Second)
	require.Eventually(t, func() bool {
		h := d.readyBy(followers[0], "big")
		return len(h) == 1 && h[0] == next
	}, 5*time.Second, 50*time.Millisecond, "the new leader (%s) finished big", next)

	// Nothing lost: both Applications, web the same object as before, on both survivors.
	for _, r := range followers {
		uid, phase, ready := d.app(r, "web")
		assert.Equal(t, webUID, uid, "web on %s is the object created before the failover", r)
		assert.Equal(t, "Running", phase)
		assert.Equal(t, 2.0, ready)
	}
}
