package nodes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"text/template"

	"github.com/opemu/opemu/cache"
)

// funcs are the template functions kwok's pod controller gives its Stages, answered from
// these Nodes: a Node's InternalIP (kind's 172.18.0.x), and a Pod's IP from its Node's pod
// CIDR (10.244.<index>.x, held while the Pod runs: the placement's), or its Node's with
// hostNetwork.
func (p *Pods) funcs() template.FuncMap {
	return template.FuncMap{
		"NodeIP":      func() string { return nodeIP(0) },
		"NodeIPWith":  p.nodeIPWith,
		"NodeIPsWith": func(node string) []string { return nonEmpty(p.nodeIPWith(node)) },
		"PodIPWith":   p.podIPWith,
		"PodIPsWith": func(node string, hostNetwork bool, uid, name, namespace string) ([]string, error) {
			ip, err := p.podIPWith(node, hostNetwork, uid, name, namespace)
			return nonEmpty(ip), err
		},
	}
}

// nodeIP is the InternalIP of the i-th Node.
func nodeIP(i int) string { return fmt.Sprintf("172.18.0.%d", 2+i%250) }

// nodeIPWith is the InternalIP of the Node name, "" when no kubelet here serves it.
func (p *Pods) nodeIPWith(name string) string {
	i, ok := p.index[name]
	if !ok {
		return ""
	}
	return nodeIP(i)
}

// podIPWith is the IP of the Pod namespace/name on node: its Node's with hostNetwork, else the
// one its placement holds (a Pod placed without one, or not placed, gets one now).
func (p *Pods) podIPWith(node string, hostNetwork bool, _, name, namespace string) (string, error) {
	i, ok := p.index[node]
	if !ok {
		return "", fmt.Errorf("no simulated kubelet runs node %q", node)
	}
	if hostNetwork {
		return nodeIP(i), nil
	}
	key := cache.Key{Resource: "pods", Namespace: namespace, Name: name}
	p.mu.Lock()
	ip := p.place(key, node, nil)
	p.mu.Unlock()
	if ip == 0 {
		return "", fmt.Errorf("node %q has no pod IP left", node)
	}
	return fmt.Sprintf("10.244.%d.%d", i%256, ip), nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// FollowStages watches the Stages until ctx is done and, on every change, enqueues the Pods
// bound to these Nodes, so the next pass over each matches the Stages now stored.
func (p *Pods) FollowStages(ctx context.Context, w Watcher, enqueue func(cache.Key) bool) {
	p.stages.Follow(ctx, w, func() {
		enqueueKeys(p, func(p *Pods) map[cache.Key]placement { return p.placed }, enqueue)
	})
}

// enqueueKeys enqueues the keys of the map of p that pick returns (read under p.mu; enqueued
// outside it).
func enqueueKeys[V any](p *Pods, pick func(*Pods) map[cache.Key]V, enqueue func(cache.Key) bool) {
	p.mu.Lock()
	keys := slices.Collect(maps.Keys(pick(p)))
	p.mu.Unlock()
	for _, k := range keys {
		enqueue(k)
	}
}
