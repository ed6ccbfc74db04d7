// Package readme holds the README's tests: TestREADME runs every shell block of README.md in
// order, as a newcomer pastes them, in a fresh clone (its conventions are at the top of
// readme_test.go), and TestREADMETestenvFromAnotherModule uses the README's testenv snippet
// from a module of its own. They need Linux namespaces (unshare, nsenter; root), curl, kubectl
// and openssl; without them they fail in CI and are skipped elsewhere.
package readme
