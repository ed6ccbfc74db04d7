package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	opemu "github.com/opemu/opemu/app"
	"github.com/opemu/opemu/certs"
	"github.com/opemu/opemu/server"
)

// config is every setting of SPEC §1: the server's (app.Config) and the logger's. Each has an
// environment variable and an equivalent flag (the flag wins); parseConfig fills the binary's
// defaults and rejects invalid values.
type config struct {
	opemu.Config
	LogLevel  string
	LogFormat string
	// SPEC §13: where tokens and certificates come from (security.go loads them into
	// app.Config's Tokens and TLS).
	Token     string
	TokenFile string
	// ClientCAFile is CLIENT_CA_FILE: more CAs whose client certificates authenticate.
	ClientCAFile string
	TLSMode      string // TLS: "" or "self-signed"
	TLSCertFile  string
	TLSKeyFile   string
	TLSDir       string
	TLSSANs      []string
	// LoadFile is the snapshot the server starts from (LOAD, SPEC §23); load reads it into
	// app.Config's Load.
	LoadFile string
	// SPEC §12: etcd's TLS files (loadEtcdTLS loads them into app.Config's EtcdTLS).
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
}

// setting is one configurable value: its variable, its flag, its default and how to parse it.
type setting struct {
	env, flag, def, usage string
	parse                 func(c *config, v string) error
}

func settings() []setting {
	return []setting{
		{"PORT", "port", "3000", "HTTP port on 127.0.0.1 (ignored when ADDR is set)", nil},
		{"ADDR", "addr", "", `whole listen address, e.g. ":3000" or "127.0.0.1:0" (default 127.0.0.1:PORT)`, nil},
		{"POD_NAME", "pod-name", "", "identity in leader election and Event sources (default hostname + random suffix)", func(c *config, v string) error { c.PodName = v; return nil }},
		{"ENABLE_LEADER_ELECTION", "enable-leader-election", "true", "false: this process always leads", boolInto(func(c *config) *bool { return &c.EnableLeaderElection })},
		{"LEASE_BACKEND", "lease-backend", "", "file, memory or store (default store with STORE=etcd, else file when POD_NAME is set, else memory)", func(c *config, v string) error {
			if v != "" && v != "file" && v != "memory" && v != "store" {
				return fmt.Errorf("must be file, memory or store, not %q", v)
			}
			c.LeaseBackend = v
			return nil
		}},
		{"LEASE_NAME", "lease-name", "elide-operator-leader", "the lease's name", func(c *config, v string) error { c.LeaseName = v; return nil }},
		{"LEASE_NAMESPACE", "lease-namespace", "default", "the lease's namespace (created at start when missing)", func(c *config, v string) error { c.LeaseNamespace = v; return nil }},
		{"LEASE_FILE", "lease-file", "", "record of the file backend (default <tmp>/opemu-<namespace>-<name>.lease)", func(c *config, v string) error { c.LeaseFile = v; return nil }},
		{"LEASE_DURATION", "lease-duration", "15s", "lease duration", durationInto(func(c *config) *time.Duration { return &c.LeaseDuration }, false)},
		{"RENEW_DEADLINE", "renew-deadline", "10s", "renew deadline", durationInto(func(c *config) *time.Duration { return &c.RenewDeadline }, false)},
		{"RETRY_PERIOD", "retry-period", "2s", "retry period", durationInto(func(c *config) *time.Duration { return &c.RetryPeriod }, false)},
		{"ENABLE_CONTROLLER", "enable-controller", "true", "false: serve the API only, reconcile nothing", boolInto(func(c *config) *bool { return &c.EnableController })},
		{"NODES", "nodes", "1", "how many Nodes the cluster has, named as kind names them (opemu-control-plane, opemu-worker, opemu-worker2, ...), Ready and heartbeating through Leases in kube-node-lease; 0 = none", intInto(func(c *config) *int { return &c.Nodes }, 0)},
		{"WORKER_COUNT", "worker-count", "2", "reconcile workers", intInto(func(c *config) *int { return &c.WorkerCount }, 1)},
		{"RECONCILE_INTERVAL", "reconcile-interval", "30s", "periodic resync of every object; 0 disables", durationInto(func(c *config) *time.Duration { return &c.ReconcileInterval }, true)},
		{"MAX_RETRIES", "max-retries", "5", "retries after a failed reconcile before the key is dropped", intInto(func(c *config) *int { return &c.MaxRetries }, 0)},
		{"BACKOFF_BASE", "backoff-base", "1s", "per-key exponential backoff: first wait", durationInto(func(c *config) *time.Duration { return &c.BackoffBase }, false)},
		{"BACKOFF_MAX", "backoff-max", "16s", "per-key exponential backoff: longest wait", durationInto(func(c *config) *time.Duration { return &c.BackoffMax }, false)},
		{"QUEUE_QPS", "queue-qps", "10", "token bucket rate for rate-limited requeues", func(c *config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				return fmt.Errorf("must be a positive number, not %q", v)
			}
			c.QueueQPS = f
			return nil
		}},
		{"QUEUE_BURST", "queue-burst", "100", "token bucket burst", intInto(func(c *config) *int { return &c.QueueBurst }, 1)},
		{"ROLLOUT_STEP", "rollout-step", "1s", "simulated rollout: time between readiness steps of Applications, and how long a bound Pod takes to run and be Ready; 0 = instant", durationInto(func(c *config) *time.Duration { return &c.RolloutStep }, true)},
		{"JOB_DURATION", "job-duration", "1s", "simulated Jobs: how long a Job's Pod runs on its Node before it succeeds; 0 = instant", durationInto(func(c *config) *time.Duration { return &c.JobDuration }, true)},
		{"WATCH_HISTORY", "watch-history", "10000", "watch events kept per resource for resuming", intInto(func(c *config) *int { return &c.WatchHistory }, 1)},
		{"WATCH_HISTORY_BYTES", "watch-history-bytes", "128MiB", "size of the watch history over all resources; older versions answer 410", sizeInto(func(c *config) *int64 { return &c.WatchHistoryBytes })},
		{"STORE", "store", "memory", "memory (each process its own cluster) or etcd (replicas sharing one etcd)", func(c *config, v string) error {
			if v != "memory" && v != "etcd" {
				return fmt.Errorf("must be memory or etcd, not %q", v)
			}
			c.Store = v
			return nil
		}},
		{"ETCD_ENDPOINTS", "etcd-endpoints", "http://127.0.0.1:2379", "comma-separated etcd client URLs (STORE=etcd)", func(c *config, v string) error {
			c.EtcdEndpoints = splitList(v)
			for _, e := range c.EtcdEndpoints {
				if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return fmt.Errorf("%q is not an http:// or https:// URL", e)
				}
			}
			if len(c.EtcdEndpoints) == 0 {
				return errors.New("at least one endpoint is needed")
			}
			return nil
		}},
		{"ETCD_PREFIX", "etcd-prefix", "/opemu", "key prefix of the objects in etcd: <prefix>/<group or core>/<resource>/<namespace>/<name>", func(c *config, v string) error {
			if !strings.HasPrefix(v, "/") || len(v) < 2 || strings.HasSuffix(v, "/") {
				return fmt.Errorf("must start with / and not end with it, like /opemu, not %q", v)
			}
			c.EtcdPrefix = v
			return nil
		}},
		{"ETCD_CA_FILE", "etcd-ca-file", "", "CA certificates (PEM) that verify etcd's serving certificate", func(c *config, v string) error { c.EtcdCAFile = v; return nil }},
		{"ETCD_CERT_FILE", "etcd-cert-file", "", "client certificate (PEM) for etcd, with ETCD_KEY_FILE", func(c *config, v string) error { c.EtcdCertFile = v; return nil }},
		{"ETCD_KEY_FILE", "etcd-key-file", "", "the private key (PEM) of ETCD_CERT_FILE", func(c *config, v string) error { c.EtcdKeyFile = v; return nil }},
		{"ETCD_COMPACTION_INTERVAL", "etcd-compaction-interval", "5m", "how often the leader compacts etcd's history (keeping one interval of it); 0 never", durationInto(func(c *config) *time.Duration { return &c.EtcdCompactionInterval }, true)},
		{"LOAD", "load", "", "start from the state in this file: a snapshot (opemu snapshot save, POST /snapshot) or any YAML or JSON stream of objects kubectl apply -f takes", func(c *config, v string) error { c.LoadFile = v; return nil }},
		{"EVENT_LIMIT", "event-limit", "10000", "stored Events beyond which the oldest go (in-memory store; on etcd each Event's lease of EVENT_TTL bounds them)", intInto(func(c *config) *int { return &c.EventLimit }, 1)},
		{"EVENT_TTL", "event-ttl", "1h", "an Event not updated for this long goes", durationInto(func(c *config) *time.Duration { return &c.EventTTL }, false)},
		{"ALLOWED_REGISTRIES", "allowed-registries", "docker.io,gcr.io", "comma-separated registries images may come from; empty = any", func(c *config, v string) error { c.AllowedRegistries = splitList(v); return nil }},
		{"BLOCKED_IMAGES", "blocked-images", "ubuntu,debian,alpine", "comma-separated images denied at any tag; empty = none", func(c *config, v string) error { c.BlockedImages = splitList(v); return nil }},
		{"MAX_BODY", "max-body", "3MiB", "request body limit (413 beyond), e.g. 3MiB or 1048576", sizeInto(func(c *config) *int64 { return &c.MaxBody })},
		{"MAX_INFLIGHT", "max-inflight", "400", "concurrent non-watch requests (429 beyond)", intInto(func(c *config) *int { return &c.MaxInflight }, 1)},
		{"MAX_WATCHES", "max-watches", "5000", "open watches, SSE and Kubernetes (429 beyond)", intInto(func(c *config) *int { return &c.MaxWatches }, 1)},
		{"MAX_CRDS", "max-crds", "1000", "CustomResourceDefinitions served, built-in ones not counted (403 beyond)", intInto(func(c *config) *int { return &c.MaxCRDs }, 1)},
		{"MAX_CRD_BYTES", "max-crd-bytes", "64MiB", "total size of those CRDs as JSON (403 beyond), e.g. 64MiB", sizeInto(func(c *config) *int64 { return &c.MaxCRDBytes })},
		{"CALL_HISTORY", "call-history", "10000", "API calls the record keeps (GET /calls, opemu rbac; ~0.5 KB each); 0 keeps none", func(c *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("must be an integer >= 0, not %q", v)
			}
			c.CallHistory = n
			if n == 0 {
				c.CallHistory = -1
			}
			return nil
		}},
		{"AUDIT_LOG_PATH", "audit-log-path", "", "write every API call to this file as kube-apiserver's audit log (audit.k8s.io/v1 Events, JSON lines); - for standard output", func(c *config, v string) error { c.AuditLogPath = v; return nil }},
		{"AUDIT_POLICY_FILE", "audit-policy-file", "", "kube-apiserver's audit policy (levels None, Metadata, Request per user, verb, resource); empty logs every call at Metadata", func(c *config, v string) error { c.AuditPolicyFile = v; return nil }},
		{"LOG_LEVEL", "log-level", "info", "debug, info, warn or error", func(c *config, v string) error {
			switch v {
			case "debug", "info", "warn", "error":
				c.LogLevel = v
				return nil
			}
			return fmt.Errorf("must be debug, info, warn or error, not %q", v)
		}},
		{"LOG_FORMAT", "log-format", "text", "text or json", func(c *config, v string) error {
			if v != "text" && v != "json" {
				return fmt.Errorf("must be text or json, not %q", v)
			}
			c.LogFormat = v
			return nil
		}},
		{"CLOCK", "clock", "real", "real, or manual: timestamps, rollout steps, backoff, requeues, resync and Event expiry follow a clock that moves only by POST /clock/advance (leader election stays real)", func(c *config, v string) error {
			switch v {
			case "real":
				c.Clock = nil
			case "manual":
				c.Clock = opemu.NewManualClock(time.Now())
			default:
				return fmt.Errorf("must be real or manual, not %q", v)
			}
			return nil
		}},
		{"PPROF", "pprof", "false", "serve /debug/pprof/ (needs the token like every route)", boolInto(func(c *config) *bool { return &c.PProf })},
		{"ALLOWED_HOSTS", "allowed-hosts", "", `comma-separated Host names a loopback listener answers besides localhost and loopback IPs (DNS-rebinding defence); "*" = any, ".example.com" = the domain and its subdomains`, func(c *config, v string) error {
			c.AllowedHosts = splitList(v)
			for _, h := range c.AllowedHosts {
				if strings.ContainsAny(h, "/:@ ") && h != "*" && !strings.HasPrefix(h, "[") {
					return fmt.Errorf("%q is not a host name (no scheme, port or path)", h)
				}
			}
			return nil
		}},
		{"ALLOWED_ORIGINS", "allowed-origins", "", "comma-separated browser origins (e.g. http://localhost:5173) whose pages may call the API; only they get CORS headers", func(c *config, v string) error {
			c.AllowedOrigins = splitList(v)
			for _, o := range c.AllowedOrigins {
				if _, err := server.ParseOrigin(o); err != nil {
					return err
				}
			}
			return nil
		}},
		{"TOKEN", "token", "", "bearer token every request needs except /healthz, /readyz, /livez (user admin); beware: a flag shows in ps", func(c *config, v string) error {
			if strings.ContainsAny(v, " \t\r\n,") {
				return errors.New("a token may not contain white space or commas")
			}
			c.Token = v
			return nil
		}},
		{"TOKEN_FILE", "token-file", "", `kube-apiserver's static token file: one token,user,uid,"group1,group2" per line`, func(c *config, v string) error { c.TokenFile = v; return nil }},
		{"AUTHORIZATION_MODE", "authorization-mode", "AlwaysAllow", "AlwaysAllow: every request is allowed; RBAC: Roles and bindings decide, as kube-apiserver's --authorization-mode=RBAC (with kube's bootstrap policy)", func(c *config, v string) error {
			if v != opemu.AuthorizationAlwaysAllow && v != opemu.AuthorizationRBAC {
				return fmt.Errorf("must be AlwaysAllow or RBAC, not %q", v)
			}
			c.AuthorizationMode = v
			return nil
		}},
		{"CLIENT_CA_FILE", "client-ca-file", "", "with HTTPS: client certificates signed by a CA of this PEM file authenticate (CommonName the user, Organizations the groups), as kube-apiserver's --client-ca-file; TLS=self-signed's own CA always does", func(c *config, v string) error { c.ClientCAFile = v; return nil }},
		{"INSECURE_NO_AUTH", "insecure-no-auth", "false", "true: no token even when listening beyond loopback (by default one is generated and logged)", boolInto(func(c *config) *bool { return &c.InsecureNoAuth })},
		{"TLS", "tls", "", "self-signed: serve HTTPS with a CA and a certificate generated into TLS_DIR and kept across restarts", func(c *config, v string) error {
			if v != "" && v != "self-signed" {
				return fmt.Errorf("must be self-signed or empty, not %q (for your own certificate set TLS_CERT_FILE and TLS_KEY_FILE)", v)
			}
			c.TLSMode = v
			return nil
		}},
		{"TLS_CERT_FILE", "tls-cert-file", "", "serve HTTPS with this certificate chain (PEM), with TLS_KEY_FILE", func(c *config, v string) error { c.TLSCertFile = v; return nil }},
		{"TLS_KEY_FILE", "tls-key-file", "", "the private key (PEM) of TLS_CERT_FILE", func(c *config, v string) error { c.TLSKeyFile = v; return nil }},
		{"TLS_DIR", "tls-dir", "", "where TLS=self-signed keeps ca.crt, ca.key, tls.crt, tls.key (default <user config dir>/opemu/tls)", func(c *config, v string) error { c.TLSDir = v; return nil }},
		{"TLS_SANS", "tls-sans", "", "comma-separated extra DNS names and IPs for the self-signed certificate (besides localhost, 127.0.0.1, ::1, the hostname)", func(c *config, v string) error {
			c.TLSSANs = splitList(v)
			for _, h := range c.TLSSANs {
				if err := certs.CheckHost(h); err != nil {
					return err
				}
			}
			return nil
		}},
	}
}

// parseConfig reads args (without the program name) and the environment through lookupEnv
// (os.LookupEnv in main; a variable set to "" counts as set, so ALLOWED_REGISTRIES= means any). It
// returns flag.ErrHelp after printing usage to out when --help is asked for.
func parseConfig(args []string, lookupEnv func(string) (string, bool), out io.Writer) (config, error) {
	var c config
	all := settings()
	fs := flag.NewFlagSet("opemu", flag.ContinueOnError)
	fs.SetOutput(out)
	values := make(map[string]*string, len(all))
	for _, s := range all {
		v := s.def
		values[s.flag] = &v
		if s.def == "true" || s.def == "false" {
			// A switch: --insecure-no-auth alone means true; --pprof=maybe is still rejected below.
			fs.Var((*boolText)(&v), s.flag, s.usage+" [$"+s.env+"]")
			continue
		}
		fs.StringVar(&v, s.flag, s.def, s.usage+" [$"+s.env+"]")
	}
	fs.Usage = func() {
		fmt.Fprintf(out, "opemu: an in-memory Kubernetes-style API server with the operator pattern inside.\n\n"+
			"Usage:\n  opemu [flags]\n  opemu kubeconfig [--server URL] [--token TOKEN] [--certificate-authority FILE]\n"+
			"  "+snapshotUsage+"\n"+
			"  "+rbacUsage+"\n"+
			"  opemu etcd [--data-dir DIR] [--listen-client-urls URLS] [--listen-peer-urls URLS]\n\n"+
			"Every flag has an environment variable (in brackets); the flag wins.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	setByFlag := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setByFlag[f.Name] = true })
	value := func(s setting) string {
		if setByFlag[s.flag] {
			return *values[s.flag]
		}
		if v, ok := lookupEnv(s.env); ok {
			return v
		}
		return s.def
	}
	var port string
	for _, s := range all {
		v := value(s)
		switch s.env {
		case "PORT":
			port = v
			continue
		case "ADDR":
			c.Addr = v
			continue
		}
		if err := s.parse(&c, v); err != nil {
			return c, fmt.Errorf("invalid %s: %w", s.env, err)
		}
	}
	if c.Addr == "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			return c, fmt.Errorf("invalid PORT: must be 0..65535, not %q", port)
		}
		c.Addr = net.JoinHostPort("127.0.0.1", port)
	} else if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return c, fmt.Errorf("invalid ADDR: %v", err)
	}
	if c.LeaseBackend == "" && c.Store == "etcd" {
		c.LeaseBackend = "store"
	}
	if c.LeaseBackend == "store" && c.Store != "etcd" {
		return c, errors.New("invalid LEASE_BACKEND: store needs STORE=etcd (the memory store is this process's alone: use memory)")
	}
	if (c.EtcdCertFile == "") != (c.EtcdKeyFile == "") {
		return c, errors.New("invalid ETCD_CERT_FILE: ETCD_CERT_FILE and ETCD_KEY_FILE go together")
	}
	if c.PodName == "" {
		c.PodName = defaultPodName()
	} else if c.LeaseBackend == "" {
		c.LeaseBackend = "file"
	}
	if c.LeaseBackend == "" {
		c.LeaseBackend = "memory"
	}
	if c.LeaseFile == "" {
		c.LeaseFile = filepath.Join(os.TempDir(), "opemu-"+c.LeaseNamespace+"-"+c.LeaseName+".lease")
	}
	if c.RenewDeadline >= c.LeaseDuration {
		return c, errors.New("invalid RENEW_DEADLINE: must be shorter than LEASE_DURATION")
	}
	if c.BackoffMax < c.BackoffBase {
		return c, errors.New("invalid BACKOFF_MAX: must not be shorter than BACKOFF_BASE")
	}
	if err := checkSecurity(&c); err != nil {
		return c, err
	}
	return c, nil
}

func defaultPodName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "opemu"
	}
	return fmt.Sprintf("%s-%s", h, strconv.FormatInt(time.Now().UnixNano()%0xfffff, 36))
}

// sizeQuantity accepts byte suffixes people write (3MiB, 512KB) as Kubernetes quantities (3Mi, 512k).
func sizeQuantity(v string) string {
	v = strings.TrimSpace(v)
	for _, suf := range []string{"KiB", "MiB", "GiB"} {
		if strings.HasSuffix(v, suf) {
			return strings.TrimSuffix(v, "B")
		}
	}
	for from, to := range map[string]string{"KB": "k", "kB": "k", "MB": "M", "GB": "G"} {
		if strings.HasSuffix(v, from) {
			return strings.TrimSuffix(v, from) + to
		}
	}
	return strings.TrimSuffix(v, "B")
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// boolText is a flag.Value that keeps the text it is given and may be used without a value,
// as a boolean flag can; the setting's parse function checks the text.
type boolText string

func (b *boolText) String() string     { return string(*b) }
func (b *boolText) Set(v string) error { *b = boolText(v); return nil }
func (b *boolText) IsBoolFlag() bool   { return true }

func boolInto(field func(*config) *bool) func(*config, string) error {
	return func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, not %q", v)
		}
		*field(c) = b
		return nil
	}
}

func sizeInto(field func(*config) *int64) func(*config, string) error {
	return func(c *config, v string) error {
		q, err := resource.ParseQuantity(sizeQuantity(v))
		if err != nil || q.Value() <= 0 {
			return fmt.Errorf("must be a positive size like 3MiB, not %q", v)
		}
		*field(c) = q.Value()
		return nil
	}
}

func intInto(field func(*config) *int, min int) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Errorf("must be an integer >= %d, not %q", min, v)
		}
		*field(c) = n
		return nil
	}
}

func durationInto(field func(*config) *time.Duration, zeroOK bool) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d == 0 && !zeroOK {
			return fmt.Errorf("must be a positive Go duration like 500ms or 15s, not %q", v)
		}
		*field(c) = d
		return nil
	}
}
