//go:build emulated

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/vitals/record"
)

// TestVitalsArm64 runs the arm64 sidecar, built here as hack/image.sh
// builds the image's (static, -trimpath), or $VITALS_BIN when set (one
// taken out of an image), under qemu user-mode emulation on the cgroup
// test trees: its first reading must match what the trees hold, and SIGTERM must leave the final
// reading in the termination message. An arm64 node runs this binary in
// every runner pod, so a wrong GOARCH or a build that needs cgo shows here.
func TestVitalsArm64(t *testing.T) {
	qemu, err := exec.LookPath("qemu-aarch64-static")
	require.NoError(t, err, "hack/qemu-user.sh installs qemu-user-static")
	bin := os.Getenv("VITALS_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "vitals")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
		out, err := build.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	const podUID = "3f9e1c2a-7b4d-4e8f-9a1b-2c3d4e5f6a7b"
	cases := []struct {
		tree    string
		cgroup  string
		limit   uint64
		oomKill uint64
	}{
		{tree: "v2-cgroupfs", cgroup: "v2", limit: 52428800, oomKill: 1},
		{tree: "v1-cgroupfs", cgroup: "v1", limit: 67108864, oomKill: 1},
	}
	for _, c := range cases {
		t.Run(c.tree, func(t *testing.T) {
			dir := t.TempDir()
			term := filepath.Join(dir, "termination-log")
			cmd := exec.Command(qemu, bin, "--cgroup-root="+filepath.Join("..", "..", "vitals", "cgroup", "testdata", c.tree),
				"--pod-uid="+podUID, "--interval=1h", "--termination-message-path="+term)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			stderr, err := os.Create(filepath.Join(dir, "stderr"))
			require.NoError(t, err)
			cmd.Stderr = stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

			lines := bufio.NewScanner(stdout)
			require.True(t, lines.Scan(), "no reading on stdout: %v", lines.Err())
			var first record.Line
			require.NoError(t, json.Unmarshal(lines.Bytes(), &first), lines.Text())
			assert.Equal(t, record.TriggerStart, first.Trigger)
			assert.Equal(t, c.cgroup, first.Cgroup)
			if assert.NotNil(t, first.Pod.Limit, lines.Text()) {
				assert.Equal(t, c.limit, *first.Pod.Limit)
			}
			if assert.NotNil(t, first.Pod.Events, lines.Text()) {
				assert.Equal(t, c.oomKill, first.Pod.Events.OOMKill)
			}
			assert.Len(t, first.Containers, 2, lines.Text())

			// qemu passes the signal on to the emulated process, which
			// writes a final line and the termination message, and exits 0.
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			var last string
			for lines.Scan() {
				last = lines.Text()
			}
			require.NoError(t, cmd.Wait(), "vitals under qemu: %s", readFile(t, stderr.Name()))
			var line record.Line
			require.NoError(t, json.Unmarshal([]byte(last), &line), "last line %q", last)
			assert.Equal(t, record.TriggerFinal, line.Trigger)
			var final record.Final
			require.NoError(t, json.Unmarshal([]byte(readFile(t, term)), &final), "termination message")
			assert.Equal(t, c.cgroup, final.Cgroup)
			assert.Equal(t, c.oomKill, final.OOMKill)
			if assert.NotNil(t, final.Limit) {
				assert.Equal(t, c.limit, *final.Limit)
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
