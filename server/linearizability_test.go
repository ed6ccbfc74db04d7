package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// Linearizability of the store through the HTTP API: concurrent clients create, get, update
// with a resourceVersion precondition, and delete a few Applications; porcupine checks the
// recorded history against a model of a versioned key-value store. A few seconds by default;
// OPEMU_LINEARIZABILITY=2m for minutes.

type opKind int

const (
	opCreate opKind = iota
	opGet
	opUpdate
	opDelete
)

type lInput struct {
	op    opKind
	key   string
	value int64
	rv    string // opUpdate: the precondition
}

type lOutput struct {
	code  int    // HTTP status
	value int64  // spec.replicas returned (200/201)
	rv    string // resourceVersion returned (200/201)
}

type lState struct {
	exists bool
	value  int64
	rv     string
}

var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(lInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return lState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(lState), input.(lInput), output.(lOutput)
		switch in.op {
		case opCreate:
			if s.exists {
				return out.code == http.StatusConflict, s
			}
			return out.code == http.StatusCreated && out.value == in.value, lState{true, in.value, out.rv}
		case opGet:
			if !s.exists {
				return out.code == http.StatusNotFound, s
			}
			return out.code == http.StatusOK && out.value == s.value && out.rv == s.rv, s
		case opUpdate:
			switch {
			case !s.exists:
				return out.code == http.StatusNotFound, s
			case s.rv != in.rv:
				return out.code == http.StatusConflict, s
			}
			// A write that changes nothing is not a write: same value, same resourceVersion.
			sameRV := out.rv == s.rv
			return out.code == http.StatusOK && out.value == in.value && sameRV == (in.value == s.value), lState{true, in.value, out.rv}
		case opDelete:
			if !s.exists {
				return out.code == http.StatusNotFound, s
			}
			return out.code == http.StatusOK, lState{}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lInput), output.(lOutput)
		return fmt.Sprintf("%v %s v=%d rv=%s -> %d v=%d rv=%s", in.op, in.key, in.value, in.rv, out.code, out.value, out.rv)
	},
}

func TestLinearizability(t *testing.T) {
	t.Parallel()
	duration := 3 * time.Second
	if v := os.Getenv("OPEMU_LINEARIZABILITY"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		duration = d
	}
	e := newEnv(t)
	client := e.http.Client()
	keys := []string{"k0", "k1", "k2"}
	var mu sync.Mutex
	var history []porcupine.Operation
	lastRV := map[string]string{} // a recently seen rv per key, to make some updates succeed
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()

	do := func(method, path, body string) lOutput {
		req, _ := http.NewRequest(method, e.http.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return lOutput{code: -1}
		}
		defer resp.Body.Close()
		out := lOutput{code: resp.StatusCode}
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
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 42))
			for ctx.Err() == nil {
				in := lInput{op: opKind(r.IntN(4)), key: keys[r.IntN(len(keys))], value: int64(r.IntN(100))}
				body := fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q},"spec":{"replicas":%d,"image":"nginx:1"}}`, in.key, in.value)
				call := time.Since(start).Nanoseconds()
				var out lOutput
				switch in.op {
				case opCreate:
					out = do("POST", appsPath, body)
				case opGet:
					out = do("GET", appsPath+"/"+in.key, "")
				case opUpdate:
					mu.Lock()
					in.rv = lastRV[in.key]
					mu.Unlock()
					if in.rv == "" {
						in.rv = "1"
					}
					body = strings.Replace(body, `"metadata":{`, `"metadata":{"resourceVersion":"`+in.rv+`",`, 1)
					out = do("PUT", appsPath+"/"+in.key, body)
				case opDelete:
					out = do("DELETE", appsPath+"/"+in.key, "")
					out.value, out.rv = 0, ""
				}
				ret := time.Since(start).Nanoseconds()
				if out.code == -1 {
					return // the context ended mid-request
				}
				mu.Lock()
				if out.rv != "" {
					lastRV[in.key] = out.rv
				}
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Greater(t, len(history), 100)
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, time.Minute)
	if res != porcupine.Ok {
		f, err := os.CreateTemp("", "opemu-linearizability-*.html")
		if err == nil {
			_ = porcupine.Visualize(kvModel, info, f)
			f.Close()
			t.Logf("visualization: %s", f.Name())
		}
	}
	require.Equal(t, porcupine.Ok, res, "the history of %d operations is not linearizable", len(history))
	t.Logf("%d operations checked: linearizable", len(history))
}
