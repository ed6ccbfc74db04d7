package application

import (
	"strings"
	"sync"
)

// verdicts is the image policy's shortcut: it remembers the denial message ("" for allowed) of
// recently judged references, since parsing and normalising one (distribution/reference) is
// most of a write's policy cost and images repeat. It holds at most maxVerdicts and is cleared
// when full. FuzzImagePolicyMemory holds a remembered verdict to a fresh judgement.
type verdicts struct {
	mu sync.Mutex // guards m
	m  map[string]string
}

// maxVerdicts bounds verdicts.
const maxVerdicts = 4096

// get returns the remembered denial of image, and whether there is one.
func (v *verdicts) get(image string) (denial string, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	denial, ok = v.m[image]
	return denial, ok
}

// put remembers the denial of image ("" for allowed).
func (v *verdicts) put(image, denial string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.m) >= maxVerdicts || v.m == nil {
		v.m = make(map[string]string, maxVerdicts)
	}
	v.m[strings.Clone(image)] = denial
}
