package testenv_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opemu/opemu/testenv"
)

// BenchmarkStartStop is testenv.Start and Stop of one environment, one after the other: with
// one CRD (a suite's usual shape), and with the webhook configurations of a suite too (a CA and
// a serving certificate made and written each time). ms/median is the median of the
// iterations (SPEC §17: ≤ 10 ms), ms/p90 their 90th percentile.
func BenchmarkStartStop(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts testenv.Options
	}{
		{"crd", testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{thingsCRD()}}},
		{"crd+webhooks", testenv.Options{
			CRDs:                  []*apiextensionsv1.CustomResourceDefinition{thingsCRD()},
			WebhookInstallOptions: testenv.WebhookInstallOptions{Paths: []string{"testdata/webhooks"}},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				env, err := testenv.Start(ctx, bc.opts)
				if err != nil {
					b.Fatal(err)
				}
				if err := env.Stop(); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(ms(took[len(took)/2]), "ms/median")
			b.ReportMetric(ms(took[len(took)*9/10]), "ms/p90")
		})
	}
}

// BenchmarkIdleRSS starts OPEMU_BENCH_ENVS environments (default 20) with one CRD each and
// reports what each adds to the process's resident memory once they are all idle
// (MiB-rss/env; SPEC §17: ≤ 5 MiB) and to the live heap (MiB-heap/env). used-MiB-rss/env is
// the same after a client has written a Deployment and a ConfigMap into every environment
// (what a suite's first test makes each build on first use: the typed kinds' schemas).
// Figures are taken after a garbage collection that returns freed memory to the OS.
func BenchmarkIdleRSS(b *testing.B) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("OPEMU_BENCH_ENVS")); err == nil && v > 0 {
		n = v
	}
	opts := testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{thingsCRD()}}
	ctx := context.Background()
	// One environment started and stopped first: what the process pays once (package
	// initialisation, the first compiles) is not charged to the environments measured.
	warm, err := testenv.Start(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	_ = warm.Stop()
	var idle, heap, used float64
	for b.Loop() {
		rss0, heap0 := settle()
		envs := make([]*testenv.Environment, n)
		for i := range envs {
			if envs[i], err = testenv.Start(ctx, opts); err != nil {
				b.Fatal(err)
			}
		}
		rss1, heap1 := settle()
		for _, env := range envs {
			use(b, env)
		}
		rss2, _ := settle()
		for _, env := range envs {
			if err := env.Stop(); err != nil {
				b.Fatal(err)
			}
		}
		idle = mib(rss1-rss0) / float64(n)
		heap = mib(heap1-heap0) / float64(n)
		used = mib(rss2-rss0) / float64(n)
	}
	b.ReportMetric(idle, "MiB-rss/env")
	b.ReportMetric(heap, "MiB-heap/env")
	b.ReportMetric(used, "used-MiB-rss/env")
}

// use writes a Deployment and a ConfigMap into env, as a suite's first test would.
func use(b *testing.B, env *testenv.Environment) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"a": "b"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// settle collects garbage, returns it to the OS, and reports the resident set and the heap in
// use, in bytes.
func settle() (rss, heap uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return vmRSS(), ms.HeapInuse
}

// vmRSS is the process's resident set (Linux /proc/self/status), in bytes.
func vmRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			kb, _ := strconv.ParseUint(string(bytes.Fields(rest)[0]), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mib(n uint64) float64       { return float64(int64(n)) / (1 << 20) }
