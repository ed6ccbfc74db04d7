package conformance

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
)

// Difference is one place where opemu's normalised answers are not kube-apiserver's.
type Difference struct {
	// Path is where, from the case's root: setup.1, steps.0.status, steps.2.body.items.0.kind.
	Path []string
	// Want is kube-apiserver's value there, Got opemu's; Missing says which side has none.
	Want, Got any
	// WantMissing and GotMissing are set when that side has no value at Path.
	WantMissing, GotMissing bool
}

// String is the difference on one line.
func (d Difference) String() string {
	return formatPath(d.Path) + ": kube " + short(d.Want, d.WantMissing) + ", opemu " + short(d.Got, d.GotMissing)
}

func short(v any, missing bool) string {
	if missing {
		return "(none)"
	}
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// caseTree is a case's recording as one value: {"setup": [...], "steps": [...]}.
func caseTree(rc RecordedCase) map[string]any {
	setup := make([]any, len(rc.Setup))
	for i, s := range rc.Setup {
		setup[i] = float64(s)
	}
	return canonical(map[string]any{"setup": setup, "steps": rc.Steps}).(map[string]any)
}

// Compare lists the differences between kube-apiserver's recording of a case and opemu's
// answers, in path order.
func Compare(want, got RecordedCase) []Difference {
	var out []Difference
	diffValues(nil, caseTree(want), caseTree(got), &out)
	return out
}

func diffValues(path []string, a, b any, out *[]Difference) {
	at := func(seg string) []string {
		return append(append([]string(nil), path...), seg)
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, dup := av[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inA:
				*out = append(*out, Difference{Path: at(k), Got: y, WantMissing: true})
			case !inB:
				*out = append(*out, Difference{Path: at(k), Want: x, GotMissing: true})
			default:
				diffValues(at(k), x, y, out)
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := 0; i < max(len(av), len(bv)); i++ {
			switch {
			case i >= len(av):
				*out = append(*out, Difference{Path: at(strconv.Itoa(i)), Got: bv[i], WantMissing: true})
			case i >= len(bv):
				*out = append(*out, Difference{Path: at(strconv.Itoa(i)), Want: av[i], GotMissing: true})
			default:
				diffValues(at(strconv.Itoa(i)), av[i], bv[i], out)
			}
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, Difference{Path: path, Want: a, Got: b})
	}
}
