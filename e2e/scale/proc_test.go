package scale

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procUsage is one process's memory and CPU as the kernel counts them.
type procUsage struct {
	RSS, HWM int64 // VmRSS and VmHWM (peak), bytes
	// Anon is RssAnon, the RSS the process's own memory makes (the Go
	// heap and runtime); the rest is mostly its binary's code pages.
	Anon int64
	CPU  float64 // utime+stime, seconds
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// readProc reads /proc/<pid>/status and /proc/<pid>/stat.
func readProc(pid int) (procUsage, error) {
	var u procUsage
	if pid == 0 {
		return u, fmt.Errorf("process not running")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			u.RSS = kb << 10
		case "VmHWM:":
			u.HWM = kb << 10
		case "RssAnon:":
			u.Anon = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command (which may hold spaces) start at state (3):
	// utime and stime are fields 14 and 15.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(rest) < 13 {
		return u, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseFloat(rest[11], 64)
	st, _ := strconv.ParseFloat(rest[12], 64)
	u.CPU = (ut + st) / clockTicks
	return u, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
