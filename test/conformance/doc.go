// Package conformance holds a corpus of requests recorded from the real kube-apiserver (v1.37.2,
// built by ../shared/oracle/) and replays it against opemu, so that "what would kube-apiserver
// answer?" is a question the repository answers by itself (SPEC §18).
//
// The corpus is data: cases/*.yaml, one file per area. A case is a request or a short sequence:
// namespaces of its own (created first, named per run), setup requests whose answers are not
// compared (only their status codes), then compared steps (method, path, query, headers, body;
// a watch reads a number of events). Variables ({ns}, a row's {coll}, what a step captured)
// fill the requests; templates and a matrix of rows make the same requests for every kind.
// recorded/*.yaml hold kube-apiserver's answers, normalised: status, Content-Type, Warning and
// Retry-After, and the body (or a watch's events) with uids, resourceVersions, timestamps,
// generated names, the run's namespaces, IPs, node ports, hashes and Tables' ages replaced by
// placeholders.
//
// Recording needs the oracle, nothing else does:
//
//	KAS_FRESH=1 bash ../shared/oracle/start.sh
//	go run ./test/conformance/record                          # every case (about 15 s)
//	go run ./test/conformance/record -cases 'watch-*,cr-*'    # some; the others' recordings stay
//	bash ../shared/oracle/start.sh stop
//
// Flags: -server (https://127.0.0.1:16443), -token (kas-admin-token), -ca
// (/tmp/kas/pki/serving.crt), -cases, -dir (test/conformance), -parallel (4). Re-record a case
// whenever it or the normalisation changes; a case whose setup fails is not recorded.
//
// The replay (go test ./test/conformance) starts opemu as a lone kube-apiserver is (no
// controllers, no garbage collector, the oracle's token) with the memory store and again with the
// etcd store (Debian's etcd-server, opemu in process),
// runs every case, normalises opemu's answers the same way and compares. A difference fails the
// test unless a declared list excuses it, by case and by path (declared.go): differences.yaml
// (the README's deliberate differences, one entry per bullet, checked both ways by
// TestDifferencesMatchREADME), notserved.yaml, oracle.yaml (where a lone kube-apiserver is not a
// cluster) and defects.yaml (known defects; an excuse that excuses nothing fails the replay, so
// the list only shrinks). go test ./test/conformance -args -cases 'pod-*' replays some cases;
// -dump FILE writes every difference, declared or not, one JSON object a line, for triage.
//
// Cases are independent and run in parallel: cluster-scoped names carry {ns}, and lists of
// cluster-scoped kinds select by the label case={ns}.
package conformance
