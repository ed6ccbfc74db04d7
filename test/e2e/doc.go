// Package e2e holds opemu's end-to-end tests: the built binary run as OS processes, for what
// only a process shows (signals and graceful shutdown, exit codes, flags and the environment,
// leader election across processes over a lease file, replicas sharing one etcd, `opemu etcd`,
// a process's memory) and the README's commands run verbatim against a started binary. Tests
// of anything else run in process, in test/integration.
//
// One way to start opemu: TestMain builds the binary once for the package, with the race
// detector when the tests run under it; start runs it on 127.0.0.1:0 and reads the address
// from its first log line (`listening addr=...`); the replicas over etcd and `opemu etcd` are that
// binary too. One other build comes from the same go build, once, on first use (or meanwhile,
// when every test runs): shippedBinary (never -race) for the tests that hold the binary to
// SPEC's bounds of time and memory, which the race detector's instrumentation would distort.
package e2e
