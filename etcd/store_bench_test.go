package etcd_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/etcd"
	"github.com/opemu/opemu/etcd/etcdtest"
)

// BenchmarkStoreCreateTTL makes Event-like creates (a TTL, so an etcd lease) from 8 goroutines
// through one Store, one transaction each (group=false) or coalesced (group=true, batch.go),
// and reports etcd's CPU per create (etcd-µs/op, from its process_cpu_seconds_total, so it
// includes whatever else that etcd did) and the transactions per create it was sent (txn/op).
//
//	go test -run '^$' -bench BenchmarkStoreCreateTTL -benchtime 5000x ./etcd/
func BenchmarkStoreCreateTTL(b *testing.B) {
	e := etcdtest.Start(b)
	client := e.Client(b)
	for _, group := range []bool{false, true} {
		b.Run("group="+strconv.FormatBool(group), func(b *testing.B) {
			s, err := etcd.New(etcd.Config{Client: client, Prefix: fmt.Sprintf("/bench-%d", prefixes.Add(1)), SingleWrites: !group})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			cpu0, txn0 := etcdMetrics(b, e.Endpoint)
			b.ReportAllocs()
			b.SetParallelism(4) // 8 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					name := "ev-" + strconv.FormatInt(n.Add(1), 10)
					obj := map[string]any{"apiVersion": "v1", "kind": "Event",
						"metadata": map[string]any{"name": name, "namespace": "default"}, "reason": "Created", "message": "created " + name}
					if _, err := s.Create(b.Context(), cache.Key{Resource: "events", Namespace: "default", Name: name}, obj, cache.WriteOptions{TTL: time.Hour}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			cpu1, txn1 := etcdMetrics(b, e.Endpoint)
			b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "etcd-µs/op")
			b.ReportMetric((txn1-txn0)/float64(b.N), "txn/op")
		})
	}
}

// etcdMetrics reads etcd's process_cpu_seconds_total and the Txn requests it has started.
func etcdMetrics(b *testing.B, endpoint string) (cpu, txns float64) {
	b.Helper()
	resp, err := http.Get(endpoint + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Bytes()
		i := bytes.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		switch {
		case bytes.HasPrefix(line, []byte("process_cpu_seconds_total ")):
			cpu, _ = strconv.ParseFloat(string(line[i+1:]), 64)
		case bytes.HasPrefix(line, []byte(`grpc_server_started_total{grpc_method="Txn"`)):
			txns, _ = strconv.ParseFloat(string(line[i+1:]), 64)
		}
	}
	return cpu, txns
}
