// Command qemu-v2-probe gives the v2 test VM the sub-second clock readings
// busybox lacks (its date has no %N):
//
//	qemu-v2-probe oom <memory.events>  prints the time oom_kill first rises (1 ms poll)
//	qemu-v2-probe term <pid>           sends SIGTERM and prints how long pid took to exit
//	qemu-v2-probe now -                prints the time
//
// The poll is independent of the sidecar's inotify watch, so the sidecar's
// OOM line can be timed against it.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: qemu-v2-probe oom <memory.events> | term <pid> | now -")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "now":
		fmt.Println(time.Now().UTC().Format(time.RFC3339Nano))
	case "oom":
		for {
			b, err := os.ReadFile(os.Args[2])
			if err == nil && !bytes.Contains(b, []byte("\noom_kill 0\n")) && bytes.Contains(b, []byte("\noom_kill ")) {
				fmt.Println(time.Now().UTC().Format(time.RFC3339Nano))
				return
			}
			time.Sleep(time.Millisecond)
		}
	case "term":
		pid, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		start := time.Now()
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// The process is the shell's child: once it exits it is a zombie
		// ("Z") until the shell reaps it.
		for {
			b, err := os.ReadFile("/proc/" + os.Args[2] + "/stat")
			if err != nil || bytes.Contains(b, []byte(") Z ")) {
				fmt.Println(time.Since(start).Milliseconds())
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}
