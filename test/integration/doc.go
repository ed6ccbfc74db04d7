// Package integration holds opemu's integration tests: the server the binary runs, started in
// the test's own process (package app) and driven through the real HTTP API by real clients
// (client-go, controller-runtime, kubectl, the Python and JavaScript clients, Chromium, curl-like
// requests), under the race detector like every other package. Nothing here needs a built
// binary or another opemu process; what does (signals, exit codes, leader election across
// processes, etcd replicas, a process's memory, the README run verbatim) is in test/e2e.
//
// One way to start opemu: start configures a server from the binary's settings (the names of
// SPEC §1, with the binary's defaults, through internal/command) and serves it with package
// app on 127.0.0.1:0, stopping it when the test ends. testenv is not used: it always runs the
// garbage collector and picks its own port, where these tests need the binary's settings
// (no collector without the controllers, a restart on the same address).
package integration
