package command_test

import (
	"bytes"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/internal/command"
)

// TestSnapshotCommandLine: a wrong command line is exit code 2 with what to write instead; a
// server that does not answer is exit code 1 and leaves no file.
func TestSnapshotCommandLine(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "s.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no verb", []string{"snapshot"}, "usage: opemu snapshot save|restore"},
		{"unknown verb", []string{"snapshot", "take", file}, "usage: opemu snapshot save|restore"},
		{"no file", []string{"snapshot", "save"}, "opemu snapshot save: want one FILE (- for standard output), not 0"},
		{"two files", []string{"snapshot", "restore", file, file}, "opemu snapshot restore: want one FILE (- for standard input), not 2"},
		{"bad format", []string{"snapshot", "save", "--format", "xml", file}, `unknown snapshot format "xml": want yaml or json`},
		{"bad server", []string{"snapshot", "save", file, "--server", "127.0.0.1:3000"}, `invalid --server "127.0.0.1:3000"`},
		{"unknown flag", []string{"snapshot", "save", "--nope", file}, "flag provided but not defined: -nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			assert.Equal(t, 2, command.Run("test", tc.args, noEnv, &out, &out))
			assert.Contains(t, out.String(), tc.want)
		})
	}

	// Nothing listens on a port just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	var out bytes.Buffer
	assert.Equal(t, 1, command.Run("test", []string{"snapshot", "save", "--server", "http://" + addr, file}, noEnv, &out, &out))
	assert.Contains(t, out.String(), "opemu snapshot save: Post \"http://"+addr+"/snapshot?format=yaml\"")
	assert.NoFileExists(t, file)
}
