package cgroup

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// oomControl is v1's memory.oom_control. containerd/cgroups parses it only
// inside a full Stat (six files and memory.stat); the OOM poll reads this
// one small file several times a second, so it has its own parser.
type oomControl struct {
	KillDisable bool
	UnderOOM    bool
	// Kill is the oom_kill counter; HasKill is false on kernels before
	// 4.13, which do not count OOM kills here.
	Kill    uint64
	HasKill bool
}

// parseOOMControl parses "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n".
// Unknown keys are skipped, so a kernel that adds one still parses.
func parseOOMControl(b []byte) (oomControl, error) {
	var c oomControl
	for line := range bytes.Lines(b) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(line) == 0 {
			continue
		}
		key, val, ok := strings.Cut(string(line), " ")
		if !ok {
			return oomControl{}, fmt.Errorf("memory.oom_control: malformed line %q", line)
		}
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return oomControl{}, fmt.Errorf("memory.oom_control: %s: %w", key, err)
		}
		switch key {
		case "oom_kill_disable":
			c.KillDisable = n != 0
		case "under_oom":
			c.UnderOOM = n != 0
		case "oom_kill":
			c.Kill, c.HasKill = n, true
		}
	}
	return c, nil
}
