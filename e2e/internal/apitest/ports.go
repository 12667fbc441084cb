package apitest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePort is a TCP port that nothing listens on just now, on any address
// (the webhook server binds its port on all of them). It is taken below
// the kernel's ephemeral range, not from it: a port of that range, once
// this probe closes it, may be handed at once to an outgoing connection
// (the suites open hundreds at a time, and so does a suite running beside
// them), and the program meant to listen on it then fails. The window also
// stays below 30000, where a node cluster's NodePorts begin.
func FreePort() (int, error) {
	lo, hi := portWindow()
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d after 200 tries", lo, hi-1)
}

// portWindow is [lo, hi): from 10000 to the start of the ephemeral range
// (net.ipv4.ip_local_port_range), at most 30000; a machine whose range
// starts lower than that gets 20000-30000 and shares it.
func portWindow() (int, int) {
	lo, hi := 10000, 30000
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return lo, hi
	}
	if start, err := strconv.Atoi(fields[0]); err == nil && start < hi {
		if start-lo < 5000 {
			return 20000, 30000
		}
		hi = start
	}
	return lo, hi
}
