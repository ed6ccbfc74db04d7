package crd_test

import (
	"testing"

	"github.com/opemu/opemu/kinds"
)

const benchApp = `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"bench"},
	"spec":{"replicas":3,"image":"nginx:1.27","strategy":"RollingUpdate","config":{"a":"b"},"resources":{"limits":{"cpu":"1","memory":"1Gi"}}},
	"status":{"phase":"Running","replicas":3,"readyReplicas":3,"conditions":[{"type":"Ready","status":"True","reason":"ReconciliationSucceeded"}]}}`

func benchKind(b *testing.B) kinds.Schema { return applicationKind(b).Schema }

func BenchmarkCRDValidate(b *testing.B) {
	k := benchKind(b)
	obj := decode(b, benchApp)
	b.ReportAllocs()
	for b.Loop() {
		if errs := k.Validate(obj); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkCRDPruneDefault(b *testing.B) {
	k := benchKind(b)
	obj := decode(b, benchApp)
	b.ReportAllocs()
	for b.Loop() {
		k.Prune(obj)
		k.Default(obj)
	}
}
