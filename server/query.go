package server

import (
	"net/url"
	"strconv"
)

// Boolean query parameters (watch, allowWatchBookmarks, sendInitialEvents, force, the SSE
// stream's initial, and any flag added later) are read by queryBool alone, so every flag takes
// the same spellings. Clients spell them differently: kubectl and client-go send "true", the
// Python client "True", some scripts "1".
//
// The accepted spellings are Go's strconv.ParseBool's: 1, t, T, TRUE, true, True and 0, f, F,
// FALSE, false, False. Anything else (an empty value included) is a 400 BadRequest naming the
// parameter, never a silent false. kube-apiserver is more lenient (any value but "0" or
// "false" in any case is true, and it never refuses one); README's differences list says so.

// queryBool returns the boolean query parameter name of q: false when absent, its value when
// it is one of strconv.ParseBool's spellings, and a 400 Status otherwise.
func queryBool(q url.Values, name string) (bool, error) {
	vs, ok := q[name]
	if !ok || len(vs) == 0 {
		return false, nil
	}
	b, err := strconv.ParseBool(vs[0])
	if err != nil {
		return false, badRequest("invalid value %q for the boolean query parameter %q: use true or false (or 1, t, T, TRUE, True, 0, f, F, FALSE, False)", vs[0], name)
	}
	return b, nil
}

// queryBoolPtr is queryBool for flags whose absence means something else than false
// (sendInitialEvents): nil when absent.
func queryBoolPtr(q url.Values, name string) (*bool, error) {
	if _, ok := q[name]; !ok {
		return nil, nil
	}
	b, err := queryBool(q, name)
	if err != nil {
		return nil, err
	}
	return &b, nil
}
