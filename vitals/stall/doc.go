// Package stall judges, from a cgroup's successive memory readings, whether
// its tasks are stalled at their memory limit: reclaiming in a loop and
// making no progress, without the kernel's OOM killer ending it. Pure: the
// readings and their times come in, a verdict goes out.
package stall
