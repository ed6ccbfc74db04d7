// Package testenv runs opemu inside a Go test, in the shape of controller-runtime's envtest
// (SPEC §17): Start (or New, which stops in t.Cleanup) serves the same server the opemu binary
// runs, in this process, on a free loopback port, with a suite's CRDs installed and Established
// and its admission webhook configurations pointed at the suite's own webhook server, with
// certificates made for it. It takes milliseconds, where envtest starts a kube-apiserver and
// etcd in seconds.
//
// The options are named after envtest's Environment where they mean the same thing
// (CRDDirectoryPaths, CRDs, ErrorIfCRDPathMissing, CRDInstallOptions, WebhookInstallOptions
// with LocalServingHost, LocalServingPort, LocalServingCertDir, LocalServingCAData), so a suite
// switches by changing the package it starts its environment from.
//
// Non-goals: downloading or running Kubernetes binaries; conversion webhooks; envtest's users
// and authentication (every request is allowed on loopback).
//
// Concurrency: environments are independent; any number may run in one process, started and
// stopped from parallel tests. Stop returns once every goroutine and listener of the
// environment is gone.
package testenv
