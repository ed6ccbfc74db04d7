package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The etcd mode measures what a create through opemu (STORE=etcd, controller off) costs beyond
// etcd itself (SPEC §12): in each round, creates through opemu (A), then raw etcd puts of the
// same objects, in the same transaction shape opemu uses (If(mod_revision == 0) Then(Put)), by
// the same number of clients (B). etcd is the floor; the target is A/B >= 0.5.

// runEtcdFloor runs o.rounds rounds of A then B and summarizes them as the ab mode does.
func runEtcdFloor(ctx context.Context, o options) (*abResult, error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{o.etcd}, Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", o.etcd, err)
	}
	defer client.Close()
	res := &abResult{Mode: "etcd", A: o.target, B: o.etcd, Rounds: o.rounds, Conns: o.conns}
	var template [2][]byte
	for round := 1; round <= o.rounds; round++ {
		ao := o
		ao.phases = []string{"create"}
		ns := o.namespaceFor("a", round)
		a, err := runAPI(ctx, ao, o.target, ns)
		if err != nil {
			return nil, fmt.Errorf("A: %w", err)
		}
		// opemu writes each create's Event after answering it: A's time runs until etcd is
		// quiet again, so B is not measured against A's leftovers and A gets no credit for them.
		drain, err := settle(ctx, client)
		if err != nil {
			return nil, err
		}
		p := &a.Phases[0]
		p.DrainSeconds = round3(drain.Seconds())
		p.OpsPerSec = rate(p.Ops, time.Duration((p.Seconds+drain.Seconds())*float64(time.Second)))
		res.ARuns = append(res.ARuns, a)
		if template[0] == nil {
			if template, err = storedTemplate(ctx, o.target, ns); err != nil {
				return nil, err
			}
		}
		res.BRuns = append(res.BRuns, runPuts(ctx, o, client, template, fmt.Sprintf("/loadfloor/%s/%d/", o.runID, round)))
	}
	res.summarize([]string{"create"})
	return res, nil
}

// storedTemplate reads one Application opemu stored in ns and returns its JSON without
// resourceVersion (what opemu stores in etcd), split around its name.
func storedTemplate(ctx context.Context, target, ns string) ([2][]byte, error) {
	c := newClient(1, 10*time.Second)
	defer closeClient(c)
	body, err := do(ctx, c, http.MethodGet, appsURL(target, ns)+"/load-0-0", "", nil, true)
	if err != nil {
		return [2][]byte{}, fmt.Errorf("reading a created object: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return [2][]byte{}, err
	}
	md, _ := obj["metadata"].(map[string]any)
	delete(md, "resourceVersion")
	md["name"] = "\x00"
	raw, err := json.Marshal(obj)
	if err != nil {
		return [2][]byte{}, err
	}
	before, after, ok := bytes.Cut(raw, []byte(`"\u0000"`))
	if !ok {
		return [2][]byte{}, fmt.Errorf("no name in %s", raw)
	}
	return [2][]byte{append(before, '"'), append([]byte{'"'}, after...)}, nil
}

// runPuts creates keys under prefix with the template's objects from o.conns workers, for
// o.duration or o.n puts, one create transaction each.
func runPuts(ctx context.Context, o options, client *clientv3.Client, template [2][]byte, prefix string) *apiResult {
	r := &apiRun{o: o}
	pr := r.phase(ctx, "create", o.n, func(ctx context.Context, w, i int) error {
		name := "load-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
		value := make([]byte, 0, len(template[0])+len(name)+len(template[1]))
		value = append(append(append(value, template[0]...), name...), template[1]...)
		key := prefix + name
		resp, err := client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, string(value))).Commit()
		if err == nil && !resp.Succeeded {
			err = fmt.Errorf("%s exists", key)
		}
		return err
	})
	return &apiResult{Mode: "etcd", Target: o.etcd, Namespace: prefix, Conns: o.conns, Phases: []phaseResult{pr}}
}

// settle waits until etcd's revision has not moved for 300 ms and returns how long it kept
// moving.
func settle(ctx context.Context, client *clientv3.Client) (time.Duration, error) {
	start := time.Now()
	var last int64
	lastChange := start
	for time.Since(lastChange) < 300*time.Millisecond {
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("etcd still moving after a minute")
		}
		resp, err := client.Get(ctx, "/loadfloor-settle")
		if err != nil {
			return 0, err
		}
		if resp.Header.Revision != last {
			last, lastChange = resp.Header.Revision, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return max(lastChange.Sub(start)-20*time.Millisecond, 0), nil
}
