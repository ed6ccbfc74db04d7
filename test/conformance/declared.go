package conformance

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Declared differences: what may differ, and why. Four lists, in the order a difference is
// classified:
//
//   - differences.yaml: deliberate, each one bullet of the README's "Deliberate differences from
//     Kubernetes";
//   - notserved.yaml: kinds and groups one server serves and the other does not;
//   - oracle.yaml: where the oracle is not a cluster (a lone kube-apiserver: no controllers,
//     ServiceAccount admission off, as envtest runs it) and opemu answers as a cluster does;
//   - defects.yaml: known defects still to fix. The list only shrinks: an entry that excuses
//     nothing fails the replay (it is fixed: remove it).

// Classes of a difference.
const (
	ClassDeliberate = "deliberate"
	ClassNotServed  = "not served"
	ClassOracle     = "lone apiserver"
	ClassDefect     = "defect"
)

// Entry is one declared difference.
type Entry struct {
	// ID names it (one README bullet, one defect).
	ID string `json:"id"`
	// Bullet is the start of the README bullet it is (differences.yaml): its first words as
	// written there, markup included.
	Bullet string `json:"bullet,omitempty"`
	// Description is the difference in a line; Code names the code likely responsible
	// (defects.yaml).
	Description string `json:"description,omitempty"`
	Code        string `json:"code,omitempty"`
	// Excuses say exactly what it excuses.
	Excuses []Excuse `json:"excuses"`
}

// Excuse names the cases and the paths of their answers a difference may show at.
type Excuse struct {
	// Cases are case names or glob patterns (path.Match).
	Cases []string `json:"cases"`
	// Paths are patterns (see path.go) of the case's answers: steps.*.body.metadata.managedFields,
	// steps.1, setup.
	Paths []string `json:"paths"`
	// Stores limits the excuse to some stores (memory, etcd); empty is both.
	Stores []string `json:"stores,omitempty"`
	// Only limits the excuse to one shape of difference: "added" (opemu has a value where
	// kube-apiserver has none), "missing" (opemu has none where kube-apiserver has one) or
	// "changed" (both have one). Empty is any.
	Only string `json:"only,omitempty"`

	patterns []pattern
}

// DeclaredList is one file of entries.
type DeclaredList struct {
	Class   string
	File    string
	Entries []Entry
}

// LoadDeclared reads the four lists of dir.
func LoadDeclared(dir string) ([]*DeclaredList, error) {
	var lists []*DeclaredList
	for _, f := range []struct{ class, file string }{
		{ClassDeliberate, "differences.yaml"},
		{ClassNotServed, "notserved.yaml"},
		{ClassOracle, "oracle.yaml"},
		{ClassDefect, "defects.yaml"},
	} {
		raw, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			return nil, err
		}
		l := &DeclaredList{Class: f.class, File: f.file}
		if err := yaml.UnmarshalStrict(raw, &l.Entries); err != nil {
			return nil, fmt.Errorf("conformance: %s: %w", f.file, err)
		}
		ids := map[string]bool{}
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.ID == "" || ids[e.ID] {
				return nil, fmt.Errorf("conformance: %s: entry %d: missing or repeated id %q", f.file, i, e.ID)
			}
			ids[e.ID] = true
			if f.class == ClassDefect && e.Description == "" {
				return nil, fmt.Errorf("conformance: %s: %s: a defect needs a description", f.file, e.ID)
			}
			for j := range e.Excuses {
				x := &e.Excuses[j]
				if len(x.Cases) == 0 || len(x.Paths) == 0 {
					return nil, fmt.Errorf("conformance: %s: %s: excuse %d names no cases or no paths", f.file, e.ID, j)
				}
				switch x.Only {
				case "", "added", "missing", "changed":
				default:
					return nil, fmt.Errorf("conformance: %s: %s: excuse %d: only is added, missing or changed, not %q", f.file, e.ID, j, x.Only)
				}
				for _, c := range x.Cases {
					if _, err := filepath.Match(c, ""); err != nil {
						return nil, fmt.Errorf("conformance: %s: %s: case pattern %q: %w", f.file, e.ID, c, err)
					}
				}
				for _, p := range x.Paths {
					pat, err := parsePattern(p)
					if err != nil {
						return nil, fmt.Errorf("conformance: %s: %s: %w", f.file, e.ID, err)
					}
					x.patterns = append(x.patterns, pat)
				}
			}
		}
		lists = append(lists, l)
	}
	return lists, nil
}

// ExcuseRef names one case pattern of one excuse: its list, entry, index and the pattern. Each
// must excuse something, so that a case fixed leaves its entry.
type ExcuseRef struct {
	File, ID string
	Index    int
	Case     string
}

func (r ExcuseRef) String() string {
	return fmt.Sprintf("%s: %s, excuse %d, case %s", r.File, r.ID, r.Index, r.Case)
}

// Verdict is how a difference is declared: its class and entry, or Class "" when it is not.
type Verdict struct {
	Class, ID string
}

// Classifier classifies the differences of one store's replay and remembers which excuses were
// used.
type Classifier struct {
	lists []*DeclaredList
	store string
	used  map[ExcuseRef]bool
}

// NewClassifier classifies for store (memory, etcd).
func NewClassifier(lists []*DeclaredList, store string) *Classifier {
	return &Classifier{lists: lists, store: store, used: map[ExcuseRef]bool{}}
}

// Classify returns the first entry (in list order) that excuses d in the case named c, and
// marks every excuse that covers it as used.
func (c *Classifier) Classify(caseName string, d Difference) Verdict {
	var v Verdict
	for _, l := range c.lists {
		for _, e := range l.Entries {
			for i, x := range e.Excuses {
				if !x.appliesToStore(c.store) || !x.covers(d) {
					continue
				}
				for _, p := range x.Cases {
					if ok, _ := filepath.Match(p, caseName); !ok {
						continue
					}
					c.used[ExcuseRef{l.File, e.ID, i, p}] = true
					if v.Class == "" {
						v = Verdict{Class: l.Class, ID: e.ID}
					}
				}
			}
		}
	}
	return v
}

// Stale returns the excuses that apply to this store and excused nothing.
func (c *Classifier) Stale() []ExcuseRef {
	var out []ExcuseRef
	for _, l := range c.lists {
		for _, e := range l.Entries {
			for i, x := range e.Excuses {
				if !x.appliesToStore(c.store) {
					continue
				}
				for _, p := range x.Cases {
					if ref := (ExcuseRef{l.File, e.ID, i, p}); !c.used[ref] {
						out = append(out, ref)
					}
				}
			}
		}
	}
	return out
}

func (x Excuse) appliesToStore(store string) bool {
	if len(x.Stores) == 0 {
		return true
	}
	for _, s := range x.Stores {
		if s == store {
			return true
		}
	}
	return false
}

func (x Excuse) covers(d Difference) bool {
	switch x.Only {
	case "added":
		if !d.WantMissing {
			return false
		}
	case "missing":
		if !d.GotMissing {
			return false
		}
	case "changed":
		if d.WantMissing || d.GotMissing {
			return false
		}
	}
	for _, p := range x.patterns {
		if p.covers(d.Path) {
			return true
		}
	}
	return false
}
