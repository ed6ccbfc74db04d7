package events

import (
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/opemu/opemu/kinds"
)

// Bounds on what an Event carries, so that an Event about a rejected request (whose name or
// message may echo a megabyte of the request) stays small and valid.
const (
	// MaxMessageBytes is the longest message kept: the limit events.k8s.io/v1 puts on an
	// Event's note.
	MaxMessageBytes = 1024
	// MaxNameBytes is the longest involved-object name kept: the longest valid object name.
	MaxNameBytes = 253
	// maxReasonBytes is the longest reason kept, as events.k8s.io/v1 validates it.
	maxReasonBytes = 128
)

// bounded cuts ev's text fields to the limits above, on UTF-8 boundaries. The reference's
// other fields come from stored objects and are short; they are bounded like the name anyway.
// Text that is not valid UTF-8 is made valid the way JSON encoding does it (each invalid byte
// becomes U+FFFD), so what the Event's field selectors index is what it stores.
func bounded(ev Event) Event {
	ev.Message = truncate(validUTF8(ev.Message), MaxMessageBytes)
	ev.Reason = truncate(validUTF8(ev.Reason), maxReasonBytes)
	ev.Source, ev.Type = validUTF8(ev.Source), validUTF8(ev.Type)
	o := &ev.Object
	for _, f := range []*string{&o.Name, &o.APIVersion, &o.Kind, &o.Namespace, &o.UID, &o.ResourceVersion} {
		*f = truncate(validUTF8(*f), MaxNameBytes)
	}
	return ev
}

// validUTF8 is s with each byte that is not part of valid UTF-8 replaced by U+FFFD, as
// encoding/json writes such a string; s itself when it is valid.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// eventName names an Event about the object called ref as client-go's recorders do
// (tools/record/util.GenerateEventName): "<ref>.<hex>", or a UUID when that would not be a
// valid DNS subdomain (a name too long, or with characters an Event name may not have).
func eventName(ref string, unique uint64) string {
	name := ref + "." + strconv.FormatUint(unique, 16)
	if len(kinds.NameIsDNSSubdomain(name, false)) > 0 {
		return uuid.NewString()
	}
	return name
}
