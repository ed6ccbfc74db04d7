package server_test

import (
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkFaultsGet is a GET of one Application through the handler with the fault engine
// on: no Fault at all (the default), a Fault that does not match it, and one that matches but
// never fires (probability 0): what faults cost a request that is not faulted.
func BenchmarkFaultsGet(b *testing.B) {
	for _, sc := range []struct{ name, fault string }{
		{"faults=none", ""},
		{"faults=other-resource", `{match: {resource: configmaps}, action: {status: 503}}`},
		{"faults=matching-never-firing", `{match: {verbs: [get], resource: applications}, action: {status: 503}, probability: 0}`},
	} {
		b.Run(sc.name, func(b *testing.B) {
			e := newEnv(b)
			if code := e.serve("POST", appsPath, "application/json", app("web", 1, "nginx:1.27")); code != http.StatusCreated {
				b.Fatalf("create: %d", code)
			}
			if sc.fault != "" {
				e.fault("f", sc.fault)
			}
			b.ReportAllocs()
			for b.Loop() {
				if code := e.serve("GET", appsPath+"/web", "", ""); code != http.StatusOK {
					b.Fatal(fmt.Sprint("get: ", code))
				}
			}
		})
	}
}
