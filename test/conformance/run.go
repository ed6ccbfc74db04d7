package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Target is a server the corpus is sent to: kube-apiserver when recording, opemu when
// replaying.
type Target struct {
	// URL is the server's base URL (https://127.0.0.1:16443).
	URL string
	// Token is sent as a bearer token.
	Token string
	// Client sends the requests (trusting the server's CA). Nil means http.DefaultClient.
	Client *http.Client
}

// UserAgent is what every request sends unless a step says otherwise: kube-apiserver names an
// update's field manager after it.
const UserAgent = "opemu-conformance/v1"

// Run is what one case's requests got back, before normalisation.
type Run struct {
	Case Case
	// Setup are the setup steps' answers (only their status codes are compared).
	Setup []Answer
	// Steps are the compared steps' answers.
	Steps []Answer
	// Names are the run-specific names of the case's namespaces → their variable ({ns}).
	Names map[string]string
	// Err is set when the case could not be run to its end (a request not sent, a variable
	// not set); Setup and Steps hold what was done before.
	Err error
	// Took is how long the case ran.
	Took time.Duration
}

// Answer is one response.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
	// Events are a watch's events as they came (Step.Watch).
	Events []json.RawMessage
}

// ApplyFixtures makes the fixtures' requests in order: each must answer 2xx or 409 (already
// there), after its Until status when it has one.
func (t *Target) ApplyFixtures(ctx context.Context, fixtures []Step) error {
	for i, f := range fixtures {
		a, err := t.do(ctx, env{}, f)
		if err != nil {
			return fmt.Errorf("fixture %d (%s %s): %w", i, f.Method, f.Path, err)
		}
		if a.Status >= 300 && a.Status != http.StatusConflict {
			return fmt.Errorf("fixture %d (%s %s): %d %s", i, f.Method, f.Path, a.Status, a.Body)
		}
	}
	return nil
}

// RunAll runs cases, parallel at a time, and returns their runs in the cases' order.
func (t *Target) RunAll(ctx context.Context, cases []Case, parallel int) []*Run {
	runs := make([]*Run, len(cases))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Go(func() {
			for i := range next {
				runs[i] = t.RunCase(ctx, cases[i])
			}
		})
	}
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()
	return runs
}

// RunCase creates the case's namespaces, then makes its setup requests and its steps.
func (t *Target) RunCase(ctx context.Context, c Case) *Run {
	r := &Run{Case: c, Names: map[string]string{}}
	start := time.Now()
	defer func() { r.Took = time.Since(start) }()
	e := env{}
	for k, v := range c.Vars {
		e[k] = v
	}
	suffix := randomSuffix()
	for _, v := range c.Namespaces {
		name := namespaceName(c.Name, suffix, v)
		e[v] = name
		r.Names[name] = "{" + v + "}"
		ns := Step{Method: http.MethodPost, Path: "/api/v1/namespaces",
			Body: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
		a, err := t.do(ctx, e, ns)
		if err == nil && a.Status != http.StatusCreated {
			err = fmt.Errorf("%d %s", a.Status, a.Body)
		}
		if err != nil {
			r.Err = fmt.Errorf("namespace {%s}: %w", v, err)
			return r
		}
	}
	for i, s := range c.Setup {
		a, err := t.do(ctx, e, s)
		if err != nil {
			r.Err = fmt.Errorf("setup %d: %w", i, err)
			return r
		}
		r.Setup = append(r.Setup, a)
		capture(e, s, a)
	}
	for i, s := range c.Steps {
		a, err := t.do(ctx, e, s)
		if err != nil {
			r.Err = fmt.Errorf("step %d: %w", i, err)
			return r
		}
		r.Steps = append(r.Steps, a)
		capture(e, s, a)
	}
	return r
}

// namespaceName is the name of the namespace variable v of a case: the case's name (so that
// kube's logs and a person reading them can tell), shortened, the run's suffix for the case,
// and v unless it is ns. The names of one case sort as their variables do ({ns} before {ns2}),
// so that lists across them come in the same order on every run.
func namespaceName(c, suffix, v string) string {
	name := strings.TrimRight(c[:min(len(c), 34)], "-") + "-" + suffix
	if v != "ns" {
		name += "-" + v
	}
	return name
}

// randomSuffix is five random characters that cannot spell a word.
func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	var b [5]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// capture sets the variables s captures from a.
func capture(e env, s Step, a Answer) {
	if len(s.Capture) == 0 {
		return
	}
	tree := a.tree()
	for name, path := range s.Capture {
		if v, ok := lookup(tree, path); ok {
			e[name] = literal{v}
		}
	}
}

// do sends one step and reads its answer.
func (t *Target) do(ctx context.Context, e env, s Step) (Answer, error) {
	s, err := e.expandStep(s)
	if err != nil {
		return Answer{}, err
	}
	if s.Until == 0 {
		return t.send(ctx, e, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := t.send(ctx, e, s)
		if err != nil || a.Status == s.Until {
			return a, err
		}
		if time.Now().After(deadline) {
			return a, fmt.Errorf("%s %s: still %d after 30s, not %d: %s", s.Method, s.Path, a.Status, s.Until, a.Body)
		}
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// send makes the request of an expanded step.
func (t *Target) send(ctx context.Context, e env, s Step) (Answer, error) {
	method := s.Method
	if method == "" {
		method = http.MethodGet
	}
	u := strings.TrimRight(t.URL, "/") + s.Path
	if q, _ := s.Query.(map[string]string); len(q) > 0 {
		vs := url.Values{}
		for k, v := range q {
			vs.Set(k, v)
		}
		u += "?" + vs.Encode()
	}
	var body io.Reader
	switch {
	case s.Body != nil && s.BodyText != "":
		return Answer{}, errors.New("a step has both body and bodyText")
	case s.Body != nil:
		b, err := json.Marshal(s.Body)
		if err != nil {
			return Answer{}, err
		}
		body = bytes.NewReader(b)
	case s.BodyText != "":
		body = strings.NewReader(s.BodyText)
	}
	if s.Watch != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, watchBound(s))
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return Answer{}, err
	}
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	req.Header.Set("User-Agent", UserAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	client := t.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	a := Answer{Status: resp.StatusCode, Header: resp.Header}
	if s.Watch == nil || resp.StatusCode != http.StatusOK {
		a.Body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		return a, err
	}
	for i, d := range s.Watch.During {
		if _, err := t.do(ctx, e, d); err != nil {
			return a, fmt.Errorf("during %d: %w", i, err)
		}
	}
	dec := json.NewDecoder(resp.Body)
	for counted := 0; s.Watch.Events == 0 || counted < s.Watch.Events; {
		var ev json.RawMessage
		if err := dec.Decode(&ev); err != nil {
			// The server ended the stream (EOF, timeoutSeconds), or the bound passed: what
			// came is the answer.
			break
		}
		a.Events = append(a.Events, ev)
		var v any
		if json.Unmarshal(ev, &v) == nil && !periodicBookmark(v) {
			counted++ // a timer's bookmark is not one of the events asked for
		}
	}
	return a, nil
}

// watchBound is how long a watch step reads at most.
func watchBound(s Step) time.Duration {
	if s.Watch.Seconds > 0 {
		return time.Duration(s.Watch.Seconds) * time.Second
	}
	q, _ := s.Query.(map[string]string)
	if ts, err := strconv.Atoi(q["timeoutSeconds"]); err == nil {
		return time.Duration(ts+2) * time.Second
	}
	return 5 * time.Second
}
