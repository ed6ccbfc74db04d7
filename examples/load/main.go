// Command load measures opemu against the targets of SPEC §10, side by side with the bare
// baseline server in ./baseline, using one client for both.
//
//	go run ./examples/load -mode=api    -target http://127.0.0.1:3000 -conns 8 -duration 5s
//	go run ./examples/load -mode=ab     -a http://127.0.0.1:3000 -b http://127.0.0.1:3001 -rounds 3
//	go run ./examples/load -mode=e2e    -target http://127.0.0.1:3000 -n 1000
//	go run ./examples/load -mode=fanout -target http://127.0.0.1:3000 -clients 1000 -rate 20
//	go run ./examples/load -mode=etcd   -target http://127.0.0.1:3000 -etcd http://127.0.0.1:2379 -rounds 3
//	go run ./examples/load -mode=pods   -target http://127.0.0.1:3000 -n 10000 -deployments 1
//	go run ./examples/load -mode=kube   -kube https://127.0.0.1:6443 -kube-token T -opemu https://127.0.0.1:3000 -opemu-token T -cacert ca.crt
//	go run ./examples/load -mode=start  -target http://127.0.0.1:3000 -starts 3 -- ./opemu
//
// Each mode prints a table, or with -json one JSON object, and exits non-zero when a request
// failed or the mode's goal (every object Ready, every change delivered) was not met. The load
// tool shares the machine with the server it measures; every result reports the CPU the tool
// itself used (loadCPU, in cores) so a saturated client can be told from a slow server.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// options holds every flag. Zero durations, rates and counts mean the mode's default, as
// the flag help says.
type options struct {
	mode      string
	target    string
	etcd      string
	a, b      string
	conns     int
	duration  time.Duration
	n         int
	listN     int
	listLimit int
	listItems int
	phases    []string
	namespace string
	rounds    int
	rate      float64
	timeout   time.Duration
	clients   int
	objects   int
	// deployments is the pods mode's.
	deployments int
	drain       time.Duration
	stallWait   time.Duration
	json        bool
	// The kube mode's targets: kube-apiserver and each opemu, their tokens, and the CA files
	// (PEM) trusted for https on all of them.
	kube, kubeToken string
	opemu           []string
	opemuToken      string
	caFiles         []string
	watchers        int
	// The start mode: the command to exec, the token for its /readyz, how often.
	command []string
	token   string
	starts  int
	// idle: how long the pods mode's Pods, or the start mode's server, idle before the server's
	// memory is read (zero: 3 s for pods, 10 s for start).
	idle time.Duration
	// runID makes this run's namespaces differ from those of earlier runs against the same server.
	runID string
}

// result is what a mode returns.
type result interface {
	// writeTable prints the result for people.
	writeTable(w io.Writer)
	// failure is non-nil when the run saw a failed request or missed its goal.
	failure() error
}

// run parses args, runs the mode, and prints its result to stdout (flag errors and usage go to
// stderr). It returns flag.ErrHelp for -h, a setup error, or the result's failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var res result
	switch o.mode {
	case "api":
		res, err = runAPI(ctx, o, o.target, o.namespaceFor("", 1))
	case "ab":
		res, err = runAB(ctx, o)
	case "e2e":
		res, err = runE2E(ctx, o)
	case "fanout":
		res, err = runFanout(ctx, o)
	case "etcd":
		res, err = runEtcdFloor(ctx, o)
	case "pods":
		res, err = runPods(ctx, o)
	case "kube":
		res, err = runKube(ctx, o)
	case "start":
		res, err = runStart(ctx, o)
	}
	if err != nil {
		return err
	}
	if o.json {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
	} else {
		res.writeTable(stdout)
	}
	return res.failure()
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mode, "mode", "api", "api, ab, e2e, fanout, etcd, pods, kube or start")
	fs.StringVar(&o.target, "target", "http://127.0.0.1:3000", "server URL (api, e2e, fanout, etcd, pods; start: where the started server answers)")
	fs.StringVar(&o.etcd, "etcd", "http://127.0.0.1:2379", "etcd: the etcd the target stores in, for the raw puts of the floor")
	fs.StringVar(&o.a, "a", "http://127.0.0.1:3000", "ab: server A (opemu)")
	fs.StringVar(&o.b, "b", "http://127.0.0.1:3001", "ab: server B (the baseline)")
	fs.IntVar(&o.conns, "conns", 8, "concurrent keep-alive clients, each sending one request at a time")
	fs.DurationVar(&o.duration, "duration", 0, "api/ab/etcd: length of each phase (default 5s unless -n); fanout: how long changes are made (default 10s)")
	fs.IntVar(&o.n, "n", 0, "api/ab/etcd: requests per phase instead of -duration; e2e: Applications to create (default 1000); pods: Pods (default 10000)")
	fs.IntVar(&o.listN, "list-n", 0, "api/ab with -n: requests in the list phase (default -n)")
	fs.IntVar(&o.listLimit, "list-limit", 0, "api/ab: ?limit= on each list (0: none)")
	fs.IntVar(&o.listItems, "list-items", 0, "api/ab/kube: list a namespace seeded (untimed) with this many objects instead of the create phase's namespace, so every side lists the same size (kube default 1000)")
	phases := fs.String("phases", "create,get,update,patch,list", "api/ab: phases to run, in order (get, update and patch need create); kube: of "+kubePhases+" (the default)")
	fs.StringVar(&o.namespace, "namespace", "load", "namespace prefix; each run and round gets <prefix>-<run id>-<round>")
	fs.IntVar(&o.rounds, "rounds", 3, "ab, etcd: rounds, each running A then B; kube: rounds, each running every phase on every target")
	fs.Float64Var(&o.rate, "rate", 0, "e2e: creates per second (0: as fast as -conns allows); fanout: changes per second (default 20)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "e2e: time for every Application to become Ready; fanout, kube: time for every client to connect; pods: time for every Pod to be Running and Ready, and again to be deleted; start: for /readyz to answer 200")
	fs.IntVar(&o.deployments, "deployments", 1, "pods: Deployments the -n Pods are spread over")
	fs.IntVar(&o.clients, "clients", 1000, "fanout: SSE clients (plus one stalled client)")
	fs.IntVar(&o.objects, "objects", 10, "fanout: Applications the changes are spread over; kube: ConfigMaps of the watch phase")
	fs.DurationVar(&o.drain, "drain", 5*time.Second, "fanout, kube: time after the last change for every client to receive it")
	fs.DurationVar(&o.stallWait, "stall-wait", 0, "fanout: extra wait after the drain before checking whether the server cut the stalled client off (its write timeout is 10s)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of a table")
	fs.StringVar(&o.kube, "kube", "", "kube: kube-apiserver's URL")
	fs.StringVar(&o.kubeToken, "kube-token", "", "kube: bearer token for -kube")
	opemu := fs.String("opemu", "", "kube: opemu's URL; several, comma-separated, are each measured against -kube")
	fs.StringVar(&o.opemuToken, "opemu-token", "", "kube: bearer token for every -opemu")
	caFiles := fs.String("cacert", "", "kube, start: comma-separated PEM files of the CAs to trust for https (default: the system's)")
	fs.IntVar(&o.watchers, "watchers", 100, "kube: watches open in the watch phase")
	fs.StringVar(&o.token, "token", "", "start: bearer token for /readyz")
	fs.IntVar(&o.starts, "starts", 3, "start: how many times to start the command after --")
	fs.DurationVar(&o.idle, "idle", 0, "pods: how long every Pod runs idle before the server's RSS is read (default 3s); start: how long the server idles after its first 200 before its memory is read (default 10s)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "load: measure opemu (SPEC §10) and the baseline server.\n\nUsage:\n  go run ./examples/load [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.command = fs.Args(); len(o.command) > 0 && o.mode != "start" {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.phases = strings.Split(*phases, ",")
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.mode == "kube" {
		if !set["phases"] {
			o.phases = strings.Split(kubePhases, ",")
		}
		if !set["list-items"] {
			o.listItems = 1000
		}
	}
	o.opemu = splitList(*opemu)
	o.caFiles = splitList(*caFiles)
	o.runID = strconv.FormatInt(time.Now().UnixNano()>>20&0xffffffff, 36)
	return o, o.validate()
}

// validate fills mode defaults and rejects settings no mode can run with.
func (o *options) validate() error {
	switch o.mode {
	case "etcd":
		if o.duration == 0 && o.n == 0 {
			o.duration = 5 * time.Second
		}
	case "api", "ab":
		if o.duration == 0 && o.n == 0 {
			o.duration = 5 * time.Second
		}
		if o.listN == 0 {
			o.listN = o.n
		}
		seen := map[string]bool{}
		for _, p := range o.phases {
			switch p {
			case "create", "list":
			case "get", "update", "patch":
				if !seen["create"] {
					return fmt.Errorf("phase %q needs the create phase before it", p)
				}
			default:
				return fmt.Errorf("unknown phase %q: use create, get, update, patch or list", p)
			}
			seen[p] = true
		}
	case "kube":
		if o.duration == 0 && o.n == 0 {
			o.duration = 5 * time.Second
		}
		if o.listN == 0 {
			o.listN = o.n
		}
		if o.kube == "" || len(o.opemu) == 0 {
			return errors.New("-mode=kube needs -kube and -opemu")
		}
		if o.watchers < 1 {
			return errors.New("-watchers must be at least 1")
		}
		seen := map[string]bool{}
		for _, p := range o.phases {
			switch p {
			case "create", "list", "watch":
			case "get", "update", "patch-merge", "patch-json", "patch-strategic", "apply":
				if !seen["create"] {
					return fmt.Errorf("phase %q needs the create phase before it", p)
				}
			default:
				return fmt.Errorf("unknown phase %q: use %s", p, kubePhases)
			}
			seen[p] = true
		}
	case "start":
		if len(o.command) == 0 {
			return errors.New("-mode=start needs the command to start after --")
		}
		if o.starts < 1 || o.idle < 0 {
			return errors.New("-starts must be at least 1 and -idle not negative")
		}
		if o.idle == 0 {
			o.idle = 10 * time.Second
		}
	case "e2e":
		if o.n == 0 {
			o.n = 1000
		}
	case "fanout":
		if o.duration == 0 {
			o.duration = 10 * time.Second
		}
		if o.rate == 0 {
			o.rate = 20
		}
		if o.clients < 1 || o.objects < 1 {
			return errors.New("-clients and -objects must be at least 1")
		}
	case "pods":
		if o.n == 0 {
			o.n = 10000
		}
		if o.deployments < 1 || o.deployments > o.n {
			return errors.New("-deployments must be at least 1 and at most -n")
		}
		if o.idle == 0 {
			o.idle = 3 * time.Second
		}
	default:
		return fmt.Errorf("unknown -mode %q: use api, ab, e2e, fanout, etcd, pods, kube or start", o.mode)
	}
	switch {
	case o.conns < 1:
		return errors.New("-conns must be at least 1")
	case o.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case o.duration < 0 || o.n < 0 || o.rate < 0 || o.timeout <= 0 || o.drain < 0 || o.stallWait < 0 || o.idle < 0:
		return errors.New("durations, counts and rates must not be negative")
	}
	return nil
}

// splitList splits a comma-separated flag, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// namespaceFor names the namespace of one round, e.g. load-k3x9a2-a1.
func (o options) namespaceFor(tag string, round int) string {
	return fmt.Sprintf("%s-%s-%s%d", o.namespace, o.runID, tag, round)
}
