package readme

// TestREADME runs README.md as a newcomer follows it: every ```bash and ```sh block, in order,
// pasted into a terminal, in a fresh clone of the repository. The conventions, for whoever
// adds a section:
//
//   - A block runs in the main terminal: one bash session for the whole README (variables,
//     exports and background jobs carry over from block to block, as in a real terminal),
//     with `set -euo pipefail`: a command that fails fails the test. Each block is bounded
//     (3 minutes; `<!-- readme-test: timeout 10m -->` right above it for more): a block that
//     does not finish in time is a hang, and fails the test.
//   - Every curl a block runs directly is checked: an answer that is not 1xx or 2xx must be
//     announced by the command's comments (the comment lines right above it, or one at the end
//     of its lines: "# 409 Conflict"), and a command whose comments announce statuses must get
//     one of them. So a README comment that promises a 404 and gets a 200 fails too. Don't
//     write a three-digit number between 100 and 599 in a curl's comment unless it is a status.
//     Statuses inside a stream (a watch's ERROR event) are not HTTP statuses: name them in
//     words.
//   - A block that runs until stopped (a server, `curl -N`, `kubectl get -w`) runs in a terminal
//     of its own: `<!-- readme-test: terminal NAME; ready "REGEX" -->` right above it. It
//     starts with a fresh environment in the clone (set what it needs in the block, e.g.
//     `KUBECONFIG=... kubectl get apps -w`); the test goes on once its output matches REGEX
//     (3 minutes at most; `; timeout 10m` for more). `<!-- readme-test: stop NAME -->`, where
//     the README tells the reader to stop it (Ctrl-C), sends it SIGINT and waits for it to end.
//   - `<!-- readme-test: skip (REASON) -->` right above a block that cannot run here (it
//     needs a real cluster, a browser to look at, minutes of full load). Keep them few, and
//     say in REASON what checks that block's content instead.
//   - When the README is done, nothing may be left running: every server, job or stream a
//     block started must have been stopped by the README's own commands or by a stop marker.
//   - Everything runs in namespaces of its own (unshare): its own loopback network, so the
//     README's ports (3000, 3001-3004, 2379) are its own and never clash with another test or
//     a developer's server, and its own /tmp; HOME is a scratch directory. Nothing else is
//     rewritten: ports, paths and commands are the README's. The Go caches are the test's, and
//     the module proxy is off (GOPROXY=off): the README must build from the module cache.
//   - expectations and checks (below) hold what some blocks print, each keyed by a line that
//     one block alone holds.
//
// Run it alone with `go test ./test/readme/ -run TestREADME -v`; the clone takes the working
// tree's uncommitted changes too, so an edited README is what runs.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/tool"
)

// Bounds: a block, a terminal's start, a terminal's stop after Ctrl-C.
const (
	blockTimeout = 3 * time.Minute
	readyTimeout = 3 * time.Minute
	stopTimeout  = 15 * time.Second
)

// expectations: what the blocks (main or terminal) holding the key line print, at least.
var expectations = map[string][]string{
	// the walkthrough
	"go run .":                            {"msg=listening addr=127.0.0.1:3000 dashboard=http://127.0.0.1:3000/ui/"},
	"curl -N http://127.0.0.1:3000/watch": {`"type":"ADDED"`, `"type":"DELETED"`, `/simulate-failures":"always"`},
	"API=http://127.0.0.1:3000/apis/cloudnative.elide.dev/v1/namespaces/default/applications": {
		"HTTP/1.1 201 Created", `"kind":"ApplicationList"`, `"reason":"Conflict"`, `"kind":"Scale"`, `"name":"from-yaml"`},
	"# replicas > 100: 422 Invalid with a cause on spec.replicas": {
		`"field":"spec.replicas"`, `"field":"spec.image"`, `"reason":"Forbidden"`, `"allowed":true`},
	`-d '{"metadata":{"annotations":{"cloudnative.elide.dev/simulate-failures":"always"}}}'`: {
		"Running with 3/3 replicas ready", "simulated failure 3 of 3", `"reason":"ReconcileFailed"`, "Giving up after repeated failures", "nothing to do"},
	// kubectl, client-go and the kinds
	"kubectl explain applications.spec":                            {"application.cloudnative.elide.dev/demo created", "condition met", "FIELD: spec", `application.cloudnative.elide.dev "demo" deleted`},
	"KUBECONFIG=/tmp/opemu.kubeconfig kubectl get apps -w":         {"demo"},
	"KUBECONFIG=/tmp/opemu.kubeconfig go run ./examples/client-go": {"synced; labelling Applications by size", "labelled"},
	"kubectl get apps -L example.com/size":                         {"small"},
	"kubectl create deployment web --image=nginx:1.27 --replicas=3": {
		"deployment.apps/web created", `deployment "web" successfully rolled out`, "deployment.apps/web scaled",
		"out of 5 new replicas have been updated", "progressDeadlineSeconds: 600", "imagePullPolicy: IfNotPresent",
		"reason: NewReplicaSetAvailable", "configmap/settings created", "secret/creds created", "service/web created",
		"job.batch/once created", "job.batch/once condition met", "deployment.apps/web   5/5     5            5",
		"FIELD: strategy <DeploymentStrategy>", `deployment.apps "web" deleted`},
	"kubectl -n shop create rolebinding operator --role=operator --serviceaccount=shop:operator": {
		"no", `configmaps is forbidden: User "system:serviceaccount:shop:operator" cannot create resource "configmaps" in API group "" in the namespace "shop"`},
	`curl -sk -H "Authorization: Bearer $SA_TOKEN" -H 'Content-Type: application/json' \`: {`"reason":"Forbidden"`, `"code":403`},
	"kubectl -n shop auth can-i --list --as=system:serviceaccount:shop:operator":          {"yes", "configmap/settings created", "[get list watch create]"},
	"kubectl apply -f examples/policies/max-replicas.yaml": {
		"denied request: at most 5 replicas, not 7", "deployment.apps/web created",
		"Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas': at most 5 replicas, not 8",
		`{"observedGeneration":1,"typeChecking":{}}`},
	"kubectl delete deployment api --cascade=orphan":                                                             {"api-a", "api-b", `deployment.apps "api" deleted`},
	"USE_EXISTING_CLUSTER=true KUBECONFIG=/tmp/opemu.kubeconfig go test -count=1 ./examples/memcached-operator/": {"ok  \tgithub.com/opemu/opemu/examples/memcached-operator"},
	// time and faults
	"CLOCK=manual go run .":            {"msg=listening"},
	"curl -X POST $B/controller/pause": {`"result":"error"`, `"message":"nothing to step: no key is due; 1 waiting, the next due in 1s`, `"phase":"Running"`},
	"kubectl annotate node opemu-control-plane nodes.opemu.dev/kubelet=Stopped": {
		"opemu-control-plane   NotReady", `"key":"node.kubernetes.io/unreachable"`, "Terminating", "Pending",
		"Marking for deletion Pod default/cart-", `deployment "cart" successfully rolled out`},
	"kubectl create cronjob tick --image=busybox:1.36 --schedule='*/5 * * * *' -- date": {
		"cronjob.batch/tick created", "cronjob.batch/tick condition met", "Created job tick-", `cronjob.batch "tick" deleted`},
	"kubectl apply -f examples/faults/throttle-lists.yaml": {"HTTP/1.1 429 Too Many Requests", `injected by Fault \"throttle-lists\"`, `"type":"ERROR"`, "fault.faults.opemu.dev/web-status-conflicts created"},
	// snapshots
	"./opemu snapshot save /tmp/demo.yaml": {"saved", "restored", `application.cloudnative.elide.dev "demo" deleted`},
	// high availability and TLS
	"./opemu etcd --data-dir /tmp/opemu-etcd &":                                   {"etcd ready", `"store":"etcd"`, `"readyReplicas":8`, `"host":"operator-`},
	"for i in 1 2; do POD_NAME=operator-$i PORT=300$i ./opemu & pid[$i]=$!; done": {`"isLeader":true`, "HTTP/1.1 503", "HTTP/1.1 200"},
	"export TOKEN=$(openssl rand -hex 24)":                                        {`"kind":"APIVersions"`, `"reason":"Unauthorized"`, "No resources found"},
}

// checks: what a substring cannot say (how many, in which order, what is gone), for the blocks
// holding the key line, as expectations; each returns what is wrong with the block's output.
var checks = map[string]func(out string) []string{
	"curl -X POST $B/controller/pause":               steppedThrough,
	"kubectl delete deployment api --cascade=orphan": collectedConfigMaps,
	// the operator's cleanup of the walkthrough's web, among the Events kubectl lists
	"kubectl explain applications.spec": matches(`Normal\s+Cleanup\s+application/web\s`),
}

// matches is a check that the output matches the regular expression re.
func matches(re string) func(string) []string {
	return func(out string) []string {
		if !regexp.MustCompile(re).MatchString(out) {
			return []string{fmt.Sprintf("nothing matches %s", re)}
		}
		return nil
	}
}

// steppedThrough: "Stepping through the loop" takes stepper through three failures and its
// rollout, one reconcile per step, its attempts 1, 2, 4, 1 and 1 s apart on the manual clock,
// and resumes the controller at the end.
func steppedThrough(out string) []string {
	var wrong []string
	for result, n := range map[string]int{`"result":"error"`: 3, `"result":"success"`: 3} {
		if got := strings.Count(out, result); got != n {
			wrong = append(wrong, fmt.Sprintf("%d steps answer %s, want %d", got, result, n))
		}
	}
	if !strings.Contains(out, `"queue":[{"object":"default/stepper","state":"due"`) {
		wrong = append(wrong, "the queue, before the first step, does not hold default/stepper due")
	}
	var history struct {
		Items []struct {
			StartTime time.Time `json:"startTime"`
			Phase     string    `json:"phase"`
			Message   string    `json:"message"`
		} `json:"items"`
	}
	i := strings.Index(out, `{"items":[`)
	if i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&history) != nil || len(history.Items) == 0 {
		return append(wrong, "no history of stepper")
	}
	var gaps []time.Duration
	for i := 1; i < len(history.Items); i++ {
		gaps = append(gaps, history.Items[i].StartTime.Sub(history.Items[i-1].StartTime))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, time.Second, time.Second}; !slices.Equal(gaps, want) {
		wrong = append(wrong, fmt.Sprintf("the attempts are %v apart on the clock, want %v", gaps, want))
	}
	if last := history.Items[len(history.Items)-1]; last.Phase != "Running" || last.Message != "Running with 2/2 replicas ready" {
		wrong = append(wrong, fmt.Sprintf("the last pass left %q (%s), want Running with 2/2 replicas ready", last.Phase, last.Message))
	}
	if i := strings.LastIndex(out, `{"controllers":[`); i < 0 || strings.Contains(out[i:], `"paused":true`) {
		wrong = append(wrong, "the controllers are not resumed at the end")
	}
	return wrong
}

// collectedConfigMaps: the orphaned ConfigMaps outlive their first owner; the foreground
// delete of the second takes them, and the ConfigMap of the section before stays.
func collectedConfigMaps(out string) []string {
	var wrong []string
	if !regexp.MustCompile(`api-a\s+1\s+\d+s\napi-b\s+1\s+\d+s`).MatchString(out) {
		wrong = append(wrong, "api-a and api-b are not listed after the orphaning delete")
	}
	deleted := `deployment.apps "api" deleted`
	if strings.Count(out, deleted) != 2 {
		return append(wrong, fmt.Sprintf("%q is not printed twice", deleted))
	}
	after := out[strings.LastIndex(out, deleted):]
	if strings.Contains(after, "api-a") || strings.Contains(after, "api-b") {
		wrong = append(wrong, "api-a or api-b is still listed after the foreground delete")
	}
	if !strings.Contains(after, "settings") {
		wrong = append(wrong, "the last list of ConfigMaps lacks settings")
	}
	return wrong
}

func TestREADME(t *testing.T) {
	t.Parallel()
	began := time.Now()
	for _, name := range []string{"curl", "kubectl", "openssl", "git"} {
		tool.Path(t, name)
	}
	repo := tool.Repo(t)
	raw, err := os.ReadFile(filepath.Join(repo, "README.md"))
	require.NoError(t, err)
	steps, err := parseREADME(string(raw))
	require.NoError(t, err)
	goMod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(goMod)
	require.NotNil(t, goVersion)
	assert.Contains(t, string(raw[:2000]), "Go "+string(goVersion[1])+" or later", "the README's opening says which Go to install: go.mod's")

	// Every expectation names a block that is there, so the table follows the README.
	for key := range joinKeys(expectations, checks) {
		found := 0
		for _, s := range steps {
			if s.block != nil && holds(s.block, key) {
				found++
			}
		}
		assert.Equal(t, 1, found, "expectations and checks name one README block by its line %q: %d blocks have it", key, found)
	}

	r := newRun(t, repo)
	for _, s := range steps {
		switch {
		case s.stop != "":
			r.stop(s.stop, s.line)
		case s.block.skip != "":
			t.Logf("README line %d: skipped (%s)", s.line, s.block.skip)
		case s.block.terminal != "":
			r.startTerminal(s.block)
		default:
			r.runBlock(s.block)
		}
		if t.Failed() {
			return // the cleanup says what was left running
		}
	}
	for name := range r.terminals {
		t.Errorf("the terminal %s is never stopped: the README starts it and never says to stop it (add <!-- readme-test: stop %s --> where it should)", name, name)
	}
	r.finish()
	t.Logf("the README ran in %v", time.Since(began).Round(time.Second))
}

// run is one reading of the README: the namespaces it runs in, the main terminal, and the
// terminals of their own.
type run struct {
	t       *testing.T
	scratch string // the scratch folder: clone/, home/, tmp/ (the namespace's /tmp), bin/, out/
	clone   string
	env     []string
	holder  *exec.Cmd // unshare, which made the namespaces (PID, network, mount)
	init    int       // the namespaces' first process (their PID 1), as this test sees it
	enter   []string  // the command prefix that enters them
	main    *exec.Cmd // the main terminal's bash
	stdin   io.WriteCloser
	exited  chan struct{} // closed when the main terminal's bash ends
	// terminals run blocks of their own, by name
	terminals map[string]*terminal
	blocks    []*block // every block run or started so far
	statusAt  int      // how much of the status log has been checked
}

type terminal struct {
	cmd    *exec.Cmd
	out    string // its output file
	block  *block
	exited chan struct{}
}

// newRun clones the repository (with the working tree's changes) into a scratch folder and
// starts the namespaces and the main terminal. Everything it starts is stopped when t ends.
func newRun(t *testing.T, repo string) *run {
	t.Helper()
	for _, name := range []string{"unshare", "nsenter", "ip", "bash"} {
		tool.Path(t, name)
	}
	// Not under /tmp: inside the namespaces /tmp is the scratch folder's tmp/.
	scratch, err := os.MkdirTemp("/var/tmp", "opemu-readme-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(scratch) })
	r := &run{t: t, scratch: scratch, clone: filepath.Join(scratch, "opemu"), terminals: map[string]*terminal{}}
	for _, d := range []string{"home", "tmp", "bin", "out"} {
		require.NoError(t, os.MkdirAll(filepath.Join(scratch, d), 0o755))
	}
	r.cloneRepo(repo)
	require.NoError(t, os.WriteFile(filepath.Join(scratch, "bin", "curl"), []byte(curlWrapper), 0o755))
	r.env = r.environment()

	// The namespaces: unshare makes them and forks their first process, which brings the
	// loopback up, replaces /tmp and waits. It is the init of a PID namespace: when it goes,
	// so does everything the README started, also when this test dies first (unshare gets
	// SIGKILL with its parent, and takes its child with it).
	r.holder = exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount", "--net", "--", "sh", "-c",
		`mount --bind "$1" /tmp && ip link set lo up && echo ready && exec sleep 100000`, "sh", filepath.Join(scratch, "tmp"))
	r.holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pipe, err := r.holder.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	r.holder.Stderr = &stderr
	require.NoError(t, r.holder.Start())
	t.Cleanup(r.cleanup)
	line, _ := bufio.NewReader(pipe).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		_ = r.holder.Wait()
		if os.Getenv("CI") == "" {
			t.Skipf("no namespaces here (unshare needs root): %s", stderr.String())
		}
		t.Fatalf("making the namespaces the README runs in (unshare --mount --net, as root): %s", stderr.String())
	}
	r.init = childOf(r.holder.Process.Pid)
	require.NotZero(t, r.init, "the namespaces' first process")
	// Entering a mount namespace moves to its root: --wd brings the command to the clone.
	r.enter = []string{"nsenter", "--target", strconv.Itoa(r.init), "--pid", "--mount", "--net", "--wd=" + r.clone, "--"}

	r.main = r.command("bash", "--noprofile", "--norc")
	log, err := os.Create(filepath.Join(scratch, "out", "main.log"))
	require.NoError(t, err)
	r.main.Stdout, r.main.Stderr = log, log
	r.stdin, err = r.main.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, r.main.Start())
	r.exited = make(chan struct{})
	go func() { _ = r.main.Wait(); log.Close(); close(r.exited) }()
	return r
}

// cloneRepo clones the repository as a newcomer would, then lays the working tree's
// uncommitted changes (and new files) over it: what runs is the README being edited.
func (r *run) cloneRepo(repo string) {
	t := r.t
	git := func(dir string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		require.NoError(t, err, "git %s", strings.Join(args, " "))
		return out
	}
	git(r.scratch, "clone", "--quiet", repo, r.clone)
	if diff := git(repo, "diff", "HEAD", "--binary"); len(diff) > 0 {
		cmd := exec.Command("git", "apply", "--whitespace=nowarn")
		cmd.Dir, cmd.Stdin = r.clone, strings.NewReader(string(diff))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "applying the working tree's changes to the clone: %s", out)
		t.Logf("the clone has the working tree's uncommitted changes")
	}
	for _, f := range strings.Split(strings.TrimRight(string(git(repo, "ls-files", "--others", "--exclude-standard", "-z")), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repo, f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(r.clone, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(r.clone, f), b, 0o644))
	}
}

// environment is what every terminal starts with: a newcomer's, in the scratch folder, with
// the test's Go caches and no module proxy.
func (r *run) environment() []string {
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		require.NoError(r.t, err)
		return strings.TrimSpace(string(out))
	}
	env := []string{
		"PATH=" + filepath.Join(r.scratch, "bin") + ":" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(r.scratch, "home"),
		"GOCACHE=" + goEnv("GOCACHE"), "GOMODCACHE=" + goEnv("GOMODCACHE"), "GOPATH=" + goEnv("GOPATH"),
		"GOFLAGS=" + goEnv("GOFLAGS"), "GOPROXY=off", "GOTOOLCHAIN=local",
		"LANG=C.UTF-8", "TERM=dumb", "USER=" + os.Getenv("USER"),
		"README_STATUS_LOG=" + filepath.Join(r.scratch, "out", "statuses"),
	}
	if ci, ok := os.LookupEnv("CI"); ok {
		env = append(env, "CI="+ci)
	}
	return env
}

// command is a command run inside the namespaces, in the clone, with the newcomer's
// environment, in a process group of its own.
func (r *run) command(args ...string) *exec.Cmd {
	cmd := exec.Command(r.enter[0], append(slices.Clone(r.enter[1:]), args...)...)
	cmd.Dir, cmd.Env = r.clone, r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// script writes b as a file bash runs: a first line that makes failures fatal and tells the
// curl wrapper which README line runs, then the block, whose line numbers the README's are
// shifted by one.
func (r *run) script(b *block) string {
	r.blocks = append(r.blocks, b)
	path := filepath.Join(r.scratch, "out", fmt.Sprintf("block%02d.sh", len(r.blocks)))
	offset := b.line - 2
	header := fmt.Sprintf(`set -euo pipefail; export README_SHELL=$$; trap 'export README_LINE=$((LINENO + %d))' DEBUG; `+
		`trap 'echo "README line $((LINENO + %d)): exit status $?" >&2' ERR`, offset, offset)
	require.NoError(r.t, os.WriteFile(path, []byte(header+"\n"+b.text+"\n"), 0o644))
	return path
}

// runBlock pastes b into the main terminal and waits until it is done, at most its timeout.
func (r *run) runBlock(b *block) {
	t := r.t
	path := r.script(b)
	out, rc := strings.TrimSuffix(path, ".sh")+".out", strings.TrimSuffix(path, ".sh")+".rc"
	_, err := fmt.Fprintf(r.stdin, "source %q > %q 2>&1 < /dev/null; echo $? > %q\n", path, out, rc)
	require.NoError(t, err)
	limit := orDefault(b.timeout, blockTimeout)
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.exited:
			t.Errorf("README line %d: the block failed (the terminal exited):\n%s", b.line, readFile(out))
			return
		case <-deadline.C:
			t.Errorf("README line %d: the block did not finish within %v (a command hangs?); its output so far:\n%s", b.line, limit, readFile(out))
			return
		case <-tick.C:
		}
		code, err := os.ReadFile(rc)
		if err != nil || !strings.HasSuffix(string(code), "\n") {
			continue
		}
		output := readFile(out)
		if s := strings.TrimSpace(string(code)); s != "0" {
			t.Errorf("README line %d: the block ended with exit status %s:\n%s", b.line, s, output)
			return
		}
		t.Logf("README line %d: done in %v", b.line, time.Since(start).Round(100*time.Millisecond))
		r.checkStatuses()
		r.expect(b, output)
		return
	}
}

// startTerminal runs b in a terminal of its own and waits until its output says it is ready.
func (r *run) startTerminal(b *block) {
	t := r.t
	if _, ok := r.terminals[b.terminal]; ok {
		t.Errorf("README line %d: the terminal %s is started again while it still runs", b.line, b.terminal)
		return
	}
	path := r.script(b)
	term := &terminal{out: strings.TrimSuffix(path, ".sh") + ".out", block: b, exited: make(chan struct{})}
	f, err := os.Create(term.out)
	require.NoError(t, err)
	term.cmd = r.command("bash", "--noprofile", "--norc", path)
	term.cmd.Stdout, term.cmd.Stderr = f, f
	require.NoError(t, term.cmd.Start())
	go func() { _ = term.cmd.Wait(); f.Close(); close(term.exited) }()
	r.terminals[b.terminal] = term
	if b.ready == nil {
		return
	}
	start := time.Now()
	limit := orDefault(b.timeout, readyTimeout)
	for !b.ready.MatchString(readFile(term.out)) {
		select {
		case <-term.exited:
			t.Errorf("README line %d: the terminal %s ended before it was ready:\n%s", b.line, b.terminal, readFile(term.out))
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(start) > limit {
			t.Errorf("README line %d: the terminal %s was not ready (%q) within %v:\n%s", b.line, b.terminal, b.ready, limit, readFile(term.out))
			return
		}
	}
	t.Logf("README line %d: terminal %s ready in %v", b.line, b.terminal, time.Since(start).Round(100*time.Millisecond))
}

// stop presses Ctrl-C in a terminal (SIGINT to its process group) and waits for it to end.
func (r *run) stop(name string, line int) {
	t := r.t
	term, ok := r.terminals[name]
	if !ok {
		t.Errorf("README line %d: stop %s, a terminal that does not run", line, name)
		return
	}
	delete(r.terminals, name)
	_ = syscall.Kill(-term.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-term.exited:
	case <-time.After(stopTimeout):
		t.Errorf("README line %d: the terminal %s did not end within %v of Ctrl-C:\n%s", line, name, stopTimeout, readFile(term.out))
		_ = syscall.Kill(-term.cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	r.checkStatuses()
	r.expect(term.block, readFile(term.out))
}

// checkStatuses reads the statuses the curl wrapper recorded since the last check and holds
// each to the comments of the command that got it (a command of any block so far: a terminal's
// curl records its status when it ends).
func (r *run) checkStatuses() {
	t := r.t
	raw, _ := os.ReadFile(filepath.Join(r.scratch, "out", "statuses"))
	records := string(raw[min(r.statusAt, len(raw)):])
	r.statusAt = len(raw)
	got := map[int][]int{} // README line of a command → its answers
	spans := map[int]command{}
	for _, rec := range strings.Split(strings.TrimSpace(records), "\n") {
		f := strings.Fields(rec)
		if len(f) != 2 {
			continue
		}
		line, _ := strconv.Atoi(f[0])
		code, _ := strconv.Atoi(f[1])
		at, c, ok := r.commandAt(line)
		if !ok {
			t.Errorf("README line %d: curl answered %d, outside every command the test knows", line, code)
			continue
		}
		got[at], spans[at] = append(got[at], code), c
		if code >= 300 && !c.announced()[code] {
			t.Errorf("README line %d (%s): HTTP %d, which its comments do not announce", at, c.text, code)
		}
	}
	for at, codes := range got {
		c := spans[at]
		if a := c.announced(); len(a) > 0 && !slices.ContainsFunc(codes, func(code int) bool { return a[code] }) {
			t.Errorf("README line %d (%s): its comments announce HTTP %v, and the answers were %v", at, c.text, keys(a), codes)
		}
	}
}

// commandAt finds the command that README line line is part of, and the README line it
// starts on.
func (r *run) commandAt(line int) (int, command, bool) {
	for _, b := range r.blocks {
		for _, c := range commands(b.text) {
			if first, last := b.line+c.first-1, b.line+c.last-1; first <= line && line <= last {
				return first, c, true
			}
		}
	}
	return 0, command{}, false
}

// expect checks what b printed against expectations.
func (r *run) expect(b *block, output string) {
	for key, check := range checks {
		if holds(b, key) {
			for _, w := range check(output) {
				r.t.Errorf("README line %d: the block with %q: %s; its output ends:\n%s", b.line, key, w, output[max(0, len(output)-3000):])
			}
		}
	}
	for key, wants := range expectations {
		if !holds(b, key) {
			continue
		}
		for _, want := range wants {
			if !strings.Contains(output, want) {
				r.t.Errorf("README line %d: the block with %q does not print %q; its output ends:\n%s", b.line, key, want, output[max(0, len(output)-3000):])
			}
		}
	}
}

// joinKeys returns the keys of both maps.
func joinKeys[A, B any](a map[string]A, b map[string]B) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// holds reports whether a line of b is key, its comment aside.
func holds(b *block, key string) bool {
	return slices.ContainsFunc(strings.Split(b.text, "\n"), func(line string) bool {
		var inSingle, inDouble bool
		code, _, _ := scanLine(line, &inSingle, &inDouble)
		return strings.TrimSpace(line) == key || strings.TrimSpace(code) == key
	})
}

// finish ends the main terminal, and fails the test for every process the README left running
// in its namespaces.
func (r *run) finish() {
	t := r.t
	_ = r.stdin.Close()
	select {
	case <-r.exited:
	case <-time.After(stopTimeout):
		t.Errorf("the main terminal did not exit")
	}
	if left := r.leftovers(); len(left) > 0 {
		var l []string
		for pid, cmdline := range left {
			l = append(l, fmt.Sprintf("  pid %d: %s", pid, cmdline))
		}
		t.Errorf("the README left processes running (a block starts them and none stops them):\n%s", strings.Join(l, "\n"))
	}
}

// childOf returns a child of process pid, waiting briefly for it (0 if none comes).
func childOf(pid int) int {
	for range 100 {
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			child, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", child))
			if regexp.MustCompile(`(?m)^PPid:\s+` + strconv.Itoa(pid) + `$`).Match(status) {
				return child
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

// leftovers lists the processes in the README's network namespace, but unshare and the
// namespaces' first process: pid → command line.
func (r *run) leftovers() map[int]string {
	out := map[int]string{}
	if r.init == 0 {
		return out
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", r.init))
	if err != nil {
		return out
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == r.init || pid == r.holder.Process.Pid {
			continue
		}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err != nil || link != ns {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out[pid] = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// cleanup kills whatever still runs in the namespaces, then the namespaces' holder.
func (r *run) cleanup() {
	for name, term := range r.terminals {
		_ = syscall.Kill(-term.cmd.Process.Pid, syscall.SIGKILL)
		if r.t.Failed() {
			r.t.Logf("terminal %s:\n%s", name, readFile(term.out))
		}
	}
	if r.main != nil && r.main.Process != nil {
		_ = r.stdin.Close()
		_ = syscall.Kill(-r.main.Process.Pid, syscall.SIGKILL)
	}
	for pid := range r.leftovers() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(-r.holder.Process.Pid, syscall.SIGKILL)
	_ = r.holder.Wait()
	for _, term := range r.terminals {
		select {
		case <-term.exited:
		case <-time.After(stopTimeout):
		}
	}
	if r.exited != nil {
		select {
		case <-r.exited:
		case <-time.After(stopTimeout):
		}
	}
}

// curlWrapper is the curl on the README's PATH: the real one, which also writes down, for a
// command a README block runs itself (not one of a script it runs), the README line and the
// HTTP status of the answer, for the test to hold to the command's comments.
const curlWrapper = `#!/bin/bash
real=/usr/bin/curl
# direct: this curl was started by the README's shell, or by a subshell of it ($(...), a pipe)
direct() {
  local p=$PPID want
  [[ -n "${README_SHELL:-}" && -n "${README_STATUS_LOG:-}" ]] || return 1
  want=$(tr '\0' ' ' < /proc/$README_SHELL/cmdline 2>/dev/null) || return 1
  while [[ "$p" != "$README_SHELL" ]]; do
    [[ "$p" -gt 1 && "$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)" == "$want" ]] || return 1
    p=$(awk '/^PPid:/ {print $2}' /proc/$p/status)
  done
}
direct || exec "$real" --no-progress-meter "$@"
headers=$(mktemp)
record() {
  local code
  code=$(grep -a '^HTTP/' "$headers" | tail -n 1 | cut -d' ' -f2)
  [[ -z "$code" ]] || echo "${README_LINE:-0} $code" >> "$README_STATUS_LOG"
  rm -f "$headers"
}
trap 'record; exit 130' INT
# In a terminal, curl shows no progress meter; into the test's files it would.
"$real" --no-progress-meter -D "$headers" "$@" && rc=0 || rc=$?
record
exit $rc
`

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
