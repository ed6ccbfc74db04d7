package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStartup measures exec of the built binary to its first 200 on /healthz (SPEC §1:
// under 100 ms), and reports the idle RSS right after: the mean over the iterations (MiB-rss)
// and the largest (MiB-max-rss), since one process's figure varies by about half a MiB.
func BenchmarkStartup(b *testing.B) {
	client := &http.Client{Timeout: time.Second}
	var rssKiB, maxRSSKiB float64
	var total, worst time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command(binary)
		cmd.Env = append(os.Environ(), "ADDR=127.0.0.1:0", "ENABLE_LEADER_ELECTION=false")
		pipe, err := cmd.StderrPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(pipe)
		if !sc.Scan() {
			b.Fatal("no log line")
		}
		m := listeningRE.FindStringSubmatch(sc.Text())
		if m == nil {
			b.Fatalf("first line %q", sc.Text())
		}
		for {
			resp, err := client.Get("http://" + m[1] + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Since(start) > 10*time.Second {
				b.Fatal("no 200 within 10s")
			}
			time.Sleep(200 * time.Microsecond)
		}
		d := time.Since(start)
		total, worst, n = total+d, max(worst, d), n+1
		rss := readRSS(cmd.Process.Pid)
		rssKiB, maxRSSKiB = rssKiB+rss, max(maxRSSKiB, rss)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "ms/start")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms/worst-start")
	b.ReportMetric(rssKiB/float64(n)/1024, "MiB-rss")
	b.ReportMetric(maxRSSKiB/1024, "MiB-max-rss")
}

// readRSS returns VmRSS of pid in KiB (0 when unknown).
func readRSS(pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseFloat(f[1], 64)
				return n
			}
		}
	}
	return 0
}
