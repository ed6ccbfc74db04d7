package readme

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README as a script: its shell blocks, the markers that say how to run them, and the
// commands of each block with the HTTP statuses their comments announce.

// block is one fenced shell block (```bash or ```sh) of the README.
type block struct {
	line     int    // README line of its first line (the one after the fence)
	text     string // its lines, as in the README
	terminal string // the terminal of its own it runs in; "" for the main terminal
	ready    *regexp.Regexp
	timeout  time.Duration // 0: the default
	skip     string        // why it is not run; "" to run it
}

// step is one thing the test does, in README order: run a block, or stop a terminal (Ctrl-C).
type step struct {
	block *block
	stop  string // a terminal's name
	line  int    // README line of the block or the marker
}

var (
	fenceRE  = regexp.MustCompile("^```(\\S*)")
	markerRE = regexp.MustCompile(`^<!--\s*readme-test:\s*(.*?)\s*-->\s*$`)
	skipRE   = regexp.MustCompile(`^skip \((.+)\)$`)
	stopRE   = regexp.MustCompile(`^stop ([a-z0-9-]+)$`)
	termRE   = regexp.MustCompile(`^terminal ([a-z0-9-]+)((?:; .*)?)$`)
	readyRE  = regexp.MustCompile(`^ready "(.*)"$`)
	limitRE  = regexp.MustCompile(`^timeout (\S+)$`)
)

// parseREADME returns the README's steps. A marker other than stop must sit right above a
// shell block (blank lines and other markers between are fine); an unknown marker, or one
// that is misplaced, is an error, so that a typo cannot quietly change what runs.
func parseREADME(text string) ([]step, error) {
	var steps []step
	var pending *block // the markers read since the last block
	pendingAt := 0
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			start := i + 1
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			}
			if i == len(lines) {
				return nil, fmt.Errorf("README line %d: a fence that is never closed", start)
			}
			if m[1] != "bash" && m[1] != "sh" {
				if pending != nil {
					return nil, fmt.Errorf("README line %d: a readme-test marker above a %q block, which is not a shell block", pendingAt, m[1])
				}
				continue
			}
			b := &block{}
			if pending != nil {
				b = pending
			}
			b.line, b.text = start+1, strings.Join(lines[start:i], "\n")
			steps = append(steps, step{block: b, line: b.line})
			pending = nil
			continue
		}
		m := markerRE.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, "readme-test") {
				return nil, fmt.Errorf("README line %d: a readme-test marker must be a whole line <!-- readme-test: ... -->", i+1)
			}
			if strings.TrimSpace(line) != "" && pending != nil {
				return nil, fmt.Errorf("README line %d: a readme-test marker is not right above a shell block", pendingAt)
			}
			continue
		}
		d := m[1]
		if s := stopRE.FindStringSubmatch(d); s != nil {
			if pending != nil {
				return nil, fmt.Errorf("README line %d: a readme-test marker is not right above a shell block", pendingAt)
			}
			steps = append(steps, step{stop: s[1], line: i + 1})
			continue
		}
		if pending == nil {
			pending, pendingAt = &block{}, i+1
		}
		switch {
		case skipRE.MatchString(d):
			pending.skip = skipRE.FindStringSubmatch(d)[1]
		case termRE.MatchString(d):
			t := termRE.FindStringSubmatch(d)
			pending.terminal = t[1]
			for _, opt := range strings.Split(strings.TrimPrefix(t[2], "; "), "; ") {
				switch {
				case opt == "":
				case readyRE.MatchString(opt):
					re, err := regexp.Compile(readyRE.FindStringSubmatch(opt)[1])
					if err != nil {
						return nil, fmt.Errorf("README line %d: ready: %v", i+1, err)
					}
					pending.ready = re
				case limitRE.MatchString(opt):
					d, err := time.ParseDuration(limitRE.FindStringSubmatch(opt)[1])
					if err != nil {
						return nil, fmt.Errorf("README line %d: timeout: %v", i+1, err)
					}
					pending.timeout = d
				default:
					return nil, fmt.Errorf("README line %d: unknown terminal option %q", i+1, opt)
				}
			}
		case limitRE.MatchString(d):
			limit, err := time.ParseDuration(limitRE.FindStringSubmatch(d)[1])
			if err != nil {
				return nil, fmt.Errorf("README line %d: timeout: %v", i+1, err)
			}
			pending.timeout = limit
		default:
			return nil, fmt.Errorf("README line %d: unknown readme-test marker %q", i+1, d)
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("README line %d: a readme-test marker is not right above a shell block", pendingAt)
	}
	return steps, nil
}

// command is one command of a block as bash reads it (a line, or several joined by a
// backslash, an open quote, a here-document or a trailing |, && or ||), with the comments that
// speak of it: the comment lines right above it and those at the end of its lines.
type command struct {
	first, last int    // lines of the block, from 1
	text        string // its first line
	comments    string
}

// heredocRE finds a here-document's start (<<EOF, <<-EOF, <<'EOF') and its terminator.
var heredocRE = regexp.MustCompile(`^<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// statusRE finds the HTTP statuses a comment names.
var statusRE = regexp.MustCompile(`\b[1-5][0-9][0-9]\b`)

// announced returns the HTTP statuses c's comments name.
func (c command) announced() map[int]bool {
	out := map[int]bool{}
	for _, s := range statusRE.FindAllString(c.comments, -1) {
		n, _ := strconv.Atoi(s)
		out[n] = true
	}
	return out
}

// commands splits a block into its commands.
func commands(text string) []command {
	var out []command
	var cur *command
	var above []string // comment lines right above the next command
	var inSingle, inDouble bool
	heredoc := "" // the terminator of the here-document being read
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if heredoc != "" {
			cur.last = n
			if strings.TrimSpace(line) == heredoc {
				heredoc = ""
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			switch {
			case trimmed == "":
				above = nil
				continue
			case strings.HasPrefix(trimmed, "#"):
				above = append(above, trimmed)
				continue
			}
			cur = &command{first: n, text: trimmed, comments: strings.Join(above, "\n")}
			above = nil
		}
		cur.last = n
		code, comment, pendingHeredoc := scanLine(line, &inSingle, &inDouble)
		if comment != "" {
			cur.comments += "\n" + comment
		}
		code = strings.TrimSpace(code)
		switch {
		case pendingHeredoc != "":
			heredoc = pendingHeredoc
		case inSingle || inDouble, strings.HasSuffix(code, "\\"), strings.HasSuffix(code, "|"), strings.HasSuffix(code, "&&"):
		default:
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// scanLine splits one line into its code and its comment, carrying the quoting state across
// lines, and returns the terminator of a here-document it opens.
func scanLine(line string, inSingle, inDouble *bool) (code, comment, heredoc string) {
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case *inSingle:
			if c == '\'' {
				*inSingle = false
			}
		case *inDouble:
			if c == '\\' {
				i++
			} else if c == '"' {
				*inDouble = false
			}
		case c == '\\':
			i++
		case c == '\'':
			*inSingle = true
		case c == '"':
			*inDouble = true
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i], line[i:], heredoc
		case c == '<':
			if m := heredocRE.FindStringSubmatch(line[i:]); m != nil {
				heredoc = m[1]
				i += len(m[0]) - 1
			}
		}
	}
	return line, "", heredoc
}

// TestScript: how the test reads the README's markers, blocks and commands.
func TestScript(t *testing.T) {
	t.Parallel()
	readme := "# Title\n\n<!-- readme-test: terminal server; ready \"msg=listening\"; timeout 5m -->\n\n```bash\ngo run .\n```\n\n" +
		"```go\nfmt.Println()\n```\n" +
		"```bash\n# a stale one: 409 Conflict\ncurl -X PUT $API -d '{\n  \"a\": 1}'\n\ncurl $API/x   # 404 here\n" +
		"cat <<EOF | kubectl apply -f -\nkind: X\n# not a comment: 500\nEOF\nfor p in 1 2; do echo $p; done |\n  sort\n```\n" +
		"<!-- readme-test: stop server -->\n<!-- readme-test: skip (needs a cluster; see TestX) -->\n```sh\nkubectl --context prod get pods\n```\n"
	steps, err := parseREADME(readme)
	require.NoError(t, err)
	require.Len(t, steps, 4)
	assert.Equal(t, "server", steps[0].block.terminal)
	assert.Equal(t, "msg=listening", steps[0].block.ready.String())
	assert.Equal(t, 5*time.Minute, steps[0].block.timeout)
	assert.Equal(t, 6, steps[0].block.line)
	assert.Equal(t, "", steps[1].block.terminal)
	assert.Equal(t, "server", steps[2].stop)
	assert.Equal(t, "needs a cluster; see TestX", steps[3].block.skip)

	cmds := commands(steps[1].block.text)
	require.Len(t, cmds, 4)
	assert.Equal(t, command{first: 2, last: 3, text: "curl -X PUT $API -d '{", comments: "# a stale one: 409 Conflict"}, cmds[0])
	assert.Equal(t, map[int]bool{409: true}, cmds[0].announced())
	assert.Equal(t, map[int]bool{404: true}, cmds[1].announced())
	assert.Equal(t, 6, cmds[2].first)
	assert.Equal(t, 9, cmds[2].last, "the here-document is the command's")
	assert.Empty(t, cmds[2].announced(), "a # inside a here-document is not a comment")
	assert.Equal(t, [2]int{10, 11}, [2]int{cmds[3].first, cmds[3].last}, "a trailing | continues the command")

	for _, bad := range []string{
		"<!-- readme-test: terminal x -->\ntext\n```bash\nls\n```\n",
		"<!-- readme-test: sikp (typo) -->\n```bash\nls\n```\n",
		"<!-- readme-test: skip -->\n```bash\nls\n```\n",
		"<!-- readme-test: terminal x -->\n```go\nx\n```\n",
		"<!-- readme-test: timeout 5m -->\n",
	} {
		_, err := parseREADME(bad)
		assert.Error(t, err, "%q", bad)
	}
}
