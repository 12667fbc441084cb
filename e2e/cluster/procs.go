package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// start runs bin with args in its own session, its output appended to
// logs/<name>.log, and records its pid in pids/<name>.pid. The process
// outlives this program: up returns while the cluster runs.
func start(l layout, name, bin string, args []string, env ...string) error {
	logf, err := os.OpenFile(l.log(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = l.dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(l.pid(name), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// running returns the pid of the named process when it is alive and is
// still the program it was started as (a recycled pid is not ours).
func running(l layout, name string) (int, bool) {
	b, err := os.ReadFile(l.pid(name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0, false
	}
	// startLogged records the program's path next to its pid.
	want, err := os.ReadFile(l.path("pids", name+".exe"))
	if err != nil {
		return 0, false
	}
	return pid, strings.TrimSuffix(exe, " (deleted)") == strings.TrimSpace(string(want))
}

// stop ends the named process: SIGTERM, then SIGKILL after grace. A process
// that is not running (or whose pid now belongs to another program) is left
// alone.
func stop(l layout, name string, grace time.Duration) error {
	pid, ok := running(l, name)
	if ok {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for i := 0; alive(pid) && i < 50; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if alive(pid) {
			return fmt.Errorf("%s (pid %d) did not exit", name, pid)
		}
	}
	err := os.Remove(l.pid(name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// startLogged resolves bin, records its path for running and starts it.
func startLogged(l layout, name, bin string, args []string, env ...string) error {
	path, err := exec.LookPath(bin)
	if err != nil {
		return err
	}
	if path, err = filepath.Abs(path); err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if err := os.WriteFile(l.path("pids", name+".exe"), []byte(path), 0o644); err != nil {
		return err
	}
	logStep("starting %s", name)
	return start(l, name, path, args, env...)
}
