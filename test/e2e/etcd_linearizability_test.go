package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/etcd/etcdtest"
)

// Linearizability of STORE=etcd through the HTTP API of three replicas (SPEC §12): concurrent
// clients, each bound to one replica, create, get (a consistent read), update with a
// resourceVersion precondition and delete a few Applications; porcupine checks the history
// against a versioned key-value store. A write answered with an error or not at all may or may
// not have happened: it is recorded as such (it returns "never", its outcome unknown). A few
// seconds by default; OPEMU_LINEARIZABILITY=2m for minutes.

type lOp int

const (
	lCreate lOp = iota
	lGet
	lUpdate
	lDelete
)

func (o lOp) String() string { return [...]string{"create", "get", "update", "delete"}[o] }

type lIn struct {
	op    lOp
	key   string
	value int64
	rv    string // lUpdate: the precondition
}

type lOut struct {
	code  int    // HTTP status; 0: unknown outcome (an error, a timeout)
	value int64  // spec.replicas returned
	rv    string // resourceVersion returned
}

// lState is one key's state; rv "?" is a version not known (a write of unknown outcome that
// happened): any next observation tells it.
type lState struct {
	exists bool
	value  int64
	rv     string
}

func sameOrUnknown(known, seen string) bool { return known == "?" || known == seen }

var etcdKV = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(lIn).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() []any { return []any{lState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(lState), input.(lIn), output.(lOut)
		if out.code == 0 { // unknown: it happened or it did not
			next := []any{s}
			switch {
			case in.op == lCreate && !s.exists:
				next = append(next, lState{true, in.value, "?"})
			case in.op == lUpdate && s.exists && sameOrUnknown(s.rv, in.rv):
				next = append(next, lState{true, in.value, "?"})
			case in.op == lDelete && s.exists:
				next = append(next, lState{})
			}
			return next
		}
		ok := func(b bool, next lState) []any {
			if b {
				return []any{next}
			}
			return nil
		}
		switch in.op {
		case lCreate:
			if s.exists {
				return ok(out.code == http.StatusConflict, s)
			}
			return ok(out.code == http.StatusCreated && out.value == in.value, lState{true, in.value, out.rv})
		case lGet:
			if !s.exists {
				return ok(out.code == http.StatusNotFound, s)
			}
			return ok(out.code == http.StatusOK && out.value == s.value && sameOrUnknown(s.rv, out.rv), lState{true, s.value, out.rv})
		case lUpdate:
			switch {
			case !s.exists:
				return ok(out.code == http.StatusNotFound, s)
			case out.code == http.StatusConflict:
				return ok(s.rv != in.rv, s) // an unknown version may differ too
			}
			// A write that changes nothing is not a write: same value, same resourceVersion.
			return ok(out.code == http.StatusOK && sameOrUnknown(s.rv, in.rv) && out.value == in.value &&
				(out.rv == in.rv) == (in.value == s.value), lState{true, in.value, out.rv})
		case lDelete:
			if !s.exists {
				return ok(out.code == http.StatusNotFound, s)
			}
			return ok(out.code == http.StatusOK, lState{})
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lIn), output.(lOut)
		return fmt.Sprintf("%v %s v=%d rv=%s -> %d v=%d rv=%s", in.op, in.key, in.value, in.rv, out.code, out.value, out.rv)
	},
}

// runLinearizability drives clients over rs for d (each client bound to one replica), calling
// during(elapsed) from a separate goroutine, and checks the history. It returns how many
// operations succeeded after after (a point in the run) for the caller to judge recovery.
func runLinearizability(t *testing.T, rs []*replica, d time.Duration, during func(ctx context.Context)) []porcupine.Operation {
	keys := []string{"k0", "k1", "k2"}
	client := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	var history []porcupine.Operation
	lastRV := map[string]string{}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	do := func(base, method, path, body string) lOut {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return lOut{}
		}
		defer resp.Body.Close()
		out := lOut{code: resp.StatusCode}
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			Spec struct {
				Replicas int64 `json:"replicas"`
			} `json:"spec"`
		}
		if json.NewDecoder(resp.Body).Decode(&obj) == nil && obj.Kind == "Application" {
			out.value, out.rv = obj.Spec.Replicas, obj.Metadata.ResourceVersion
		}
		return out
	}
	record := func(c int, in lIn, call int64, out lOut) {
		ret := time.Since(start).Nanoseconds()
		if out.code >= 500 || out.code == 0 || out.code == http.StatusTooManyRequests {
			if in.op == lGet {
				return // a failed read changed nothing
			}
			out, ret = lOut{}, math.MaxInt64 // a write that may or may not have happened
		}
		mu.Lock()
		defer mu.Unlock()
		if out.rv != "" {
			lastRV[in.key] = out.rv
		}
		history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
	}
	var wg sync.WaitGroup
	if during != nil {
		wg.Go(func() { during(ctx) })
	}
	const clients = 6
	for c := range clients {
		base := "http://" + rs[c%len(rs)].p.addr
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for ctx.Err() == nil {
				in := lIn{op: lOp(r.IntN(4)), key: keys[r.IntN(len(keys))], value: int64(r.IntN(100))}
				body := fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q},"spec":{"replicas":%d,"image":"nginx:1"}}`, in.key, in.value)
				call := time.Since(start).Nanoseconds()
				var out lOut
				switch in.op {
				case lCreate:
					out = do(base, "POST", appsPath, body)
				case lGet:
					out = do(base, "GET", appsPath+"/"+in.key, "")
				case lUpdate:
					mu.Lock()
					in.rv = lastRV[in.key]
					mu.Unlock()
					if in.rv == "" {
						in.rv = "1"
					}
					body = strings.Replace(body, `"metadata":{`, `"metadata":{"resourceVersion":"`+in.rv+`",`, 1)
					out = do(base, "PUT", appsPath+"/"+in.key, body)
				case lDelete:
					out = do(base, "DELETE", appsPath+"/"+in.key, "")
					out.value, out.rv = 0, ""
				}
				record(c, in, call, out)
			}
		})
	}
	wg.Wait()
	// Every replica, then, reads every key: what any of them acknowledged is there.
	for i, r := range rs {
		for _, k := range keys {
			call := time.Since(start).Nanoseconds()
			out := do("http://"+r.p.addr, "GET", appsPath+"/"+k, "")
			require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, out.code, "final read of %s on %s", k, r.name)
			record(clients+i, lIn{op: lGet, key: k}, call, out)
		}
	}
	res, info := porcupine.CheckOperationsVerbose(etcdKV.ToModel(), history, time.Minute)
	if res != porcupine.Ok {
		f, err := os.CreateTemp("", "opemu-etcd-linearizability-*.html")
		if err == nil {
			_ = porcupine.Visualize(etcdKV.ToModel(), info, f)
			f.Close()
			t.Logf("visualization: %s", f.Name())
		}
	}
	require.Equal(t, porcupine.Ok, res, "the history of %d operations is not linearizable", len(history))
	return history
}

func linearizabilityDuration(t *testing.T, def time.Duration) time.Duration {
	if v := os.Getenv("OPEMU_LINEARIZABILITY"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		return d
	}
	return def
}

// TestEtcdLinearizability: clients spread over three replicas see one linearizable store.
func TestEtcdLinearizability(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	var rs []*replica
	for i := range 3 {
		rs = append(rs, etcdReplica(t, fmt.Sprint("lin-", i), e, "/lin", "ENABLE_CONTROLLER=false"))
	}
	h := runLinearizability(t, rs, linearizabilityDuration(t, 5*time.Second), nil) // 3 s made 277 operations at load 20
	assert.Greater(t, len(h), 300)
	t.Logf("%d operations over 3 replicas: linearizable", len(h))
}

// TestEtcdLinearizabilityAcrossEtcdRestart: the same while etcd is killed (kill -9) and started
// again mid-run: no violation, no acknowledged write lost, and the replicas take writes again
// after etcd is back without being restarted.
func TestEtcdLinearizabilityAcrossEtcdRestart(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	var rs []*replica
	for i := range 3 {
		rs = append(rs, etcdReplica(t, fmt.Sprint("linr-", i), e, "/linr", "ENABLE_CONTROLLER=false"))
	}
	d := linearizabilityDuration(t, 6*time.Second)
	var back time.Duration
	start := time.Now()
	h := runLinearizability(t, rs, d, func(ctx context.Context) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d / 4):
		}
		e.Kill(t)
		select {
		case <-ctx.Done():
		case <-time.After(d / 4):
		}
		e.Restart(t)
		back = time.Since(start)
	})
	require.NotZero(t, back, "etcd was restarted during the run")
	var before, after, unknown int
	for _, op := range h {
		switch {
		case op.Output.(lOut).code == 0:
			unknown++
		case op.Input.(lIn).op != lGet && op.Output.(lOut).code < 300 && op.Call > back.Nanoseconds():
			after++
		case op.Input.(lIn).op != lGet && op.Output.(lOut).code < 300:
			before++
		}
	}
	t.Logf("%d operations, linearizable; %d writes acknowledged before etcd was back, %d after, %d of unknown outcome", len(h), before, after, unknown)
	assert.Greater(t, before, 10)
	assert.Greater(t, after, 10, "writes succeed again once etcd is back")
}
