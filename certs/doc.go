// Package certs makes the certificates opemu serves HTTPS with under TLS=self-signed (SPEC §13):
// a certificate authority generated once and kept in a directory across restarts, and a
// serving certificate it signs for the names clients use, regenerated when those names change
// or it nears expiry. Clients trust the CA (ca.crt): kubectl through the kubeconfig
// `opemu kubeconfig` writes, a real cluster through a webhook configuration's caBundle.
//
// Only the standard library's crypto is used: ECDSA P-256 keys, X.509 v3 certificates.
//
// Non-goals: a general PKI, revocation, client certificates, rotating the CA.
//
// Concurrency: Ensure may run in several processes sharing one directory at once; the CA is
// created exclusively (the first process's wins) and every file is replaced atomically.
package certs
