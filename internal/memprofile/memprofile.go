// Package memprofile turns the runtime's heap-profile sampling off before the binary's packages
// initialise. Only main imports it (blank): test binaries keep the runtime's default. The
// command sets the rate the server runs with once its settings are read (PPROF turns sampling
// back on; see internal/command).
//
// Each sample (one per 512 KiB allocated, by default) walks the allocating goroutine's stack and
// reads the function table (.gopclntab) of every frame on it; the pages read stay mapped and
// count in RSS: about 1 MiB during package initialisation, for a profile that nothing can read
// unless /debug/pprof is served (SPEC §10's idle RSS; docs/PERFORMANCE.md).
//
// It runs early because Go initialises, at each step, the first package in import-path order
// whose imports are initialised (the spec's "Package initialization"): this one imports only
// runtime, and its path sorts before internal/*, k8s.io/*, go.etcd.io/* and google.golang.org/*,
// so it comes before every package that allocates much (`GODEBUG=inittrace=1` shows it
// seventh, after 2.5 KB of allocations).
package memprofile

import "runtime"

func init() { runtime.MemProfileRate = 0 }
