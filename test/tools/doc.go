// Package tools runs the tools operator authors already use against the opemu binary, as they
// would run them against a cluster: Helm v3 and v4 (the CLIs `.ci/run` installs with go install:
// install --wait, upgrade --wait, rollback, history, test, uninstall, template piped to kubectl
// apply --server-side) with the memcached operator's chart, kustomize through the real kubectl
// (apply -k, diff -k) with the example's overlays, and an end-to-end suite of the memcached
// operator written with sigs.k8s.io/e2e-framework.
//
// TestMain builds opemu (with the race detector when the tests run under it) and the memcached
// operator once, and, as an e2e-framework suite does, starts the environment the suite's
// features share: one opemu, the CRD, and the operator running as its own process against the
// kubeconfig `opemu kubeconfig` prints. The Helm and kustomize tests each start an opemu of their
// own (the chart installs cluster-wide webhook configurations that must not meet the suite).
package tools
