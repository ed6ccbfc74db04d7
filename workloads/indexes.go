package workloads

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
)

// parseIndexes reads a Job's completedIndexes ("1,3-5,7"), keeping those below completions.
func parseIndexes(s string, completions int) sets.Set[int] {
	out := sets.New[int]()
	for part := range strings.SplitSeq(s, ",") {
		if part == "" {
			continue
		}
		first, last, ranged := strings.Cut(part, "-")
		lo, err := strconv.Atoi(first)
		if err != nil {
			continue
		}
		hi := lo
		if ranged {
			if hi, err = strconv.Atoi(last); err != nil {
				continue
			}
		}
		for ix := lo; ix <= hi && ix < completions; ix++ {
			out.Insert(ix)
		}
	}
	return out
}

// formatIndexes writes indexes as kube's completedIndexes: ascending, consecutive ones as a
// range "first-last".
func formatIndexes(indexes sets.Set[int]) string {
	list := sets.List(indexes)
	slices.Sort(list)
	var b strings.Builder
	for i := 0; i < len(list); {
		j := i
		for j+1 < len(list) && list[j+1] == list[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(list[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(list[j]))
		}
		i = j + 1
	}
	return b.String()
}
