package command

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c config)
		err   string
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:3000", c.Addr)
			assert.Equal(t, "memory", c.LeaseBackend)
			assert.True(t, c.EnableLeaderElection)
			assert.True(t, c.EnableController)
			assert.Equal(t, 15*time.Second, c.LeaseDuration)
			assert.Equal(t, 10000, c.WatchHistory)
			assert.Equal(t, time.Second, c.JobDuration)
			assert.Equal(t, int64(3<<20), c.MaxBody)
			assert.Equal(t, 400, c.MaxInflight)
			assert.Equal(t, 5000, c.MaxWatches)
			assert.Equal(t, 1000, c.MaxCRDs)
			assert.Equal(t, int64(64<<20), c.MaxCRDBytes)
			assert.Equal(t, int64(128<<20), c.WatchHistoryBytes)
			assert.Equal(t, []string{"docker.io", "gcr.io"}, c.AllowedRegistries)
			assert.Equal(t, []string{"ubuntu", "debian", "alpine"}, c.BlockedImages)
			assert.NotEmpty(t, c.PodName)
			assert.Equal(t, filepath.Join(os.TempDir(), "opemu-default-elide-operator-leader.lease"), c.LeaseFile)
		}},
		{name: "env sets PORT", env: map[string]string{"PORT": "8080"}, check: func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:8080", c.Addr)
		}},
		{name: "flag wins over env", args: []string{"--port", "9090"}, env: map[string]string{"PORT": "8080"}, check: func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:9090", c.Addr)
		}},
		{name: "ADDR overrides PORT", env: map[string]string{"PORT": "8080", "ADDR": ":0"}, check: func(t *testing.T, c config) {
			assert.Equal(t, ":0", c.Addr)
		}},
		{name: "POD_NAME selects the file backend", env: map[string]string{"POD_NAME": "operator-1"}, check: func(t *testing.T, c config) {
			assert.Equal(t, "operator-1", c.PodName)
			assert.Equal(t, "file", c.LeaseBackend)
		}},
		{name: "empty registries mean any", env: map[string]string{"ALLOWED_REGISTRIES": "", "BLOCKED_IMAGES": ""}, check: func(t *testing.T, c config) {
			assert.Empty(t, c.AllowedRegistries)
			assert.Empty(t, c.BlockedImages)
		}},
		{name: "body size in MiB", env: map[string]string{"MAX_BODY": "512KiB"}, check: func(t *testing.T, c config) {
			assert.Equal(t, int64(512<<10), c.MaxBody)
		}},
		{name: "sizes and durations", env: map[string]string{"MAX_BODY": "1Mi", "ROLLOUT_STEP": "0", "RETRY_PERIOD": "500ms", "JOB_DURATION": "250ms"}, check: func(t *testing.T, c config) {
			assert.Equal(t, int64(1<<20), c.MaxBody)
			assert.Zero(t, c.RolloutStep)
			assert.Equal(t, 250*time.Millisecond, c.JobDuration)
			assert.Equal(t, 500*time.Millisecond, c.RetryPeriod)
		}},
		{name: "security defaults", check: func(t *testing.T, c config) {
			assert.Empty(t, c.AllowedHosts)
			assert.Empty(t, c.AllowedOrigins)
			assert.Empty(t, c.Token)
			assert.Empty(t, c.TLSMode)
			assert.False(t, c.InsecureNoAuth)
			assert.True(t, strings.HasSuffix(c.TLSDir, filepath.Join("opemu", "tls")) || strings.HasSuffix(c.TLSDir, "opemu-tls"), c.TLSDir)
		}},
		{name: "security settings", env: map[string]string{
			"ALLOWED_HOSTS": "opemu.test, .lab.example", "ALLOWED_ORIGINS": "http://localhost:5173,https://app.example",
			"TOKEN": "t0k3n", "TOKEN_FILE": "/etc/opemu/tokens.csv", "TLS": "self-signed", "TLS_DIR": "/tmp/x", "TLS_SANS": "opemu.lab,10.0.0.7",
		}, check: func(t *testing.T, c config) {
			assert.Equal(t, []string{"opemu.test", ".lab.example"}, c.AllowedHosts)
			assert.Equal(t, []string{"http://localhost:5173", "https://app.example"}, c.AllowedOrigins)
			assert.Equal(t, "t0k3n", c.Token)
			assert.Equal(t, "/etc/opemu/tokens.csv", c.TokenFile)
			assert.Equal(t, "self-signed", c.TLSMode)
			assert.Equal(t, "/tmp/x", c.TLSDir)
			assert.Equal(t, []string{"opemu.lab", "10.0.0.7"}, c.TLSSANs)
		}},
		{name: "security flags", args: []string{"--insecure-no-auth", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}, check: func(t *testing.T, c config) {
			assert.True(t, c.InsecureNoAuth)
			assert.Equal(t, "c.pem", c.TLSCertFile)
			assert.Equal(t, "k.pem", c.TLSKeyFile)
		}},
		{name: "manual clock", env: map[string]string{"CLOCK": "manual"}, check: func(t *testing.T, c config) {
			manual, ok := c.Clock.(interface{ Step(time.Duration) })
			require.True(t, ok, "a clock moved by hand")
			at := c.Clock.Now()
			manual.Step(30 * time.Second)
			assert.Equal(t, at.Add(30*time.Second), c.Clock.Now())
		}},
		{name: "real clock", args: []string{"--clock", "real"}, check: func(t *testing.T, c config) {
			assert.Nil(t, c.Clock)
		}},
		{name: "bad clock", env: map[string]string{"CLOCK": "fake"}, err: "invalid CLOCK"},
		{name: "bad allowed host", env: map[string]string{"ALLOWED_HOSTS": "http://opemu.test"}, err: "invalid ALLOWED_HOSTS"},
		{name: "bad allowed origin", env: map[string]string{"ALLOWED_ORIGINS": "localhost:5173"}, err: "invalid ALLOWED_ORIGINS"},
		{name: "origin with a path", env: map[string]string{"ALLOWED_ORIGINS": "http://localhost:5173/app"}, err: "invalid ALLOWED_ORIGINS"},
		{name: "token with a space", env: map[string]string{"TOKEN": "a b"}, err: "invalid TOKEN"},
		{name: "bad TLS", env: map[string]string{"TLS": "yes"}, err: "invalid TLS"},
		{name: "cert without key", env: map[string]string{"TLS_CERT_FILE": "c.pem"}, err: "invalid TLS_CERT_FILE"},
		{name: "self-signed and cert files", env: map[string]string{"TLS": "self-signed", "TLS_CERT_FILE": "c.pem", "TLS_KEY_FILE": "k.pem"}, err: "invalid TLS"},
		{name: "SANs without self-signed", env: map[string]string{"TLS_SANS": "opemu.lab"}, err: "invalid TLS_SANS"},
		{name: "bad SAN", env: map[string]string{"TLS": "self-signed", "TLS_SANS": "not a name"}, err: "invalid TLS_SANS"},
		{name: "insecure with a token", env: map[string]string{"INSECURE_NO_AUTH": "true", "TOKEN": "t"}, err: "invalid INSECURE_NO_AUTH"},
		{name: "bad port", env: map[string]string{"PORT": "http"}, err: "invalid PORT"},
		{name: "bad duration", env: map[string]string{"LEASE_DURATION": "15"}, err: "invalid LEASE_DURATION"},
		{name: "zero lease duration", env: map[string]string{"LEASE_DURATION": "0s"}, err: "invalid LEASE_DURATION"},
		{name: "bad bool", args: []string{"--enable-controller=maybe"}, err: "invalid ENABLE_CONTROLLER"},
		{name: "bad workers", env: map[string]string{"WORKER_COUNT": "0"}, err: "invalid WORKER_COUNT"},
		{name: "bad backend", env: map[string]string{"LEASE_BACKEND": "etcd"}, err: "invalid LEASE_BACKEND"},
		{name: "bad body size", env: map[string]string{"MAX_BODY": "lots"}, err: "invalid MAX_BODY"},
		{name: "history size", env: map[string]string{"WATCH_HISTORY_BYTES": "64MiB", "MAX_WATCHES": "10"}, check: func(t *testing.T, c config) {
			assert.Equal(t, int64(64<<20), c.WatchHistoryBytes)
			assert.Equal(t, 10, c.MaxWatches)
		}},
		{name: "bad history size", env: map[string]string{"WATCH_HISTORY_BYTES": "0"}, err: "invalid WATCH_HISTORY_BYTES"},
		{name: "bad watch limit", args: []string{"--max-watches", "0"}, err: "invalid MAX_WATCHES"},
		{name: "CRD bounds", env: map[string]string{"MAX_CRDS": "5"}, args: []string{"--max-crd-bytes", "1MiB"}, check: func(t *testing.T, c config) {
			assert.Equal(t, 5, c.MaxCRDs)
			assert.Equal(t, int64(1<<20), c.MaxCRDBytes)
		}},
		{name: "bad CRD bound", env: map[string]string{"MAX_CRDS": "0"}, err: "invalid MAX_CRDS"},
		{name: "bad CRD size bound", args: []string{"--max-crd-bytes", "-1"}, err: "invalid MAX_CRD_BYTES"},
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "loud"}, err: "invalid LOG_LEVEL"},
		{name: "renew deadline not below lease", env: map[string]string{"RENEW_DEADLINE": "20s"}, err: "invalid RENEW_DEADLINE"},
		{name: "unknown flag", args: []string{"--nope"}, err: "flag provided but not defined"},
		{name: "stray argument", args: []string{"serve"}, err: "unexpected argument"},
		{name: "store defaults", check: func(t *testing.T, c config) {
			assert.Equal(t, "memory", c.Store)
			assert.Equal(t, []string{"http://127.0.0.1:2379"}, c.EtcdEndpoints)
			assert.Equal(t, "/opemu", c.EtcdPrefix)
			assert.Equal(t, 5*time.Minute, c.EtcdCompactionInterval)
		}},
		{name: "bad store", env: map[string]string{"STORE": "redis"}, err: "invalid STORE"},
		{name: "bad etcd endpoint", env: map[string]string{"ETCD_ENDPOINTS": "127.0.0.1:2379"}, err: "invalid ETCD_ENDPOINTS"},
		{name: "bad etcd prefix", env: map[string]string{"ETCD_PREFIX": "opemu/"}, err: "invalid ETCD_PREFIX"},
		{name: "store backend without etcd", env: map[string]string{"LEASE_BACKEND": "store"}, err: "invalid LEASE_BACKEND"},
		{name: "etcd cert without key", env: map[string]string{"ETCD_CERT_FILE": "c.pem"}, err: "invalid ETCD_CERT_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseConfig(tt.args, envFrom(tt.env), io.Discard)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

// TestParseConfigEtcd: STORE=etcd takes the etcd settings and the store lease backend.
func TestParseConfigEtcd(t *testing.T) {
	t.Parallel()
	env := map[string]string{"STORE": "etcd", "ETCD_ENDPOINTS": "http://10.0.0.1:2379, https://10.0.0.2:2379", "ETCD_PREFIX": "/demo", "ETCD_COMPACTION_INTERVAL": "0", "POD_NAME": "r1"}
	c, err := parseConfig(nil, envFrom(env), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "etcd", c.Store)
	assert.Equal(t, []string{"http://10.0.0.1:2379", "https://10.0.0.2:2379"}, c.EtcdEndpoints)
	assert.Equal(t, "/demo", c.EtcdPrefix)
	assert.Zero(t, c.EtcdCompactionInterval)
	assert.Equal(t, "store", c.LeaseBackend, "the shared Lease, even with POD_NAME set")
}

func TestHelpListsEverySetting(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	_, err := parseConfig([]string{"--help"}, envFrom(nil), &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	for _, s := range settings() {
		assert.Contains(t, out.String(), "$"+s.env, "help should list %s", s.env)
		assert.Contains(t, out.String(), "-"+s.flag)
	}
}

// TestHeapProfileRate: heap-profile sampling is off unless /debug/pprof is served, where it is
// the runtime's default; GODEBUG's memprofilerate wins either way.
func TestHeapProfileRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		pprof bool
		env   map[string]string
		want  int
	}{
		{name: "default", want: 0},
		{name: "pprof", pprof: true, want: 512 * 1024},
		{name: "GODEBUG without it", pprof: true, env: map[string]string{"GODEBUG": "gctrace=1"}, want: 512 * 1024},
		{name: "GODEBUG's rate", env: map[string]string{"GODEBUG": "gctrace=1,memprofilerate=1"}, want: 1},
		{name: "GODEBUG's rate with pprof", pprof: true, env: map[string]string{"GODEBUG": "memprofilerate=0"}, want: 0},
		{name: "GODEBUG's rate unreadable", env: map[string]string{"GODEBUG": "memprofilerate=x"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, heapProfileRate(tt.pprof, envFrom(tt.env)))
		})
	}
}
