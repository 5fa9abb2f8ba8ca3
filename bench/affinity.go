package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The store suite can run its S3 server on CPUs of its own, as a server on
// another host would be: the server's child process on some of the CPUs
// this process may use, the bench (and so the job it measures, local and
// cold alike) on the rest. --store-server-cpus picks them:
//
//	auto    the last CPU, when there are two or more and the server is a
//	        child process (SeaweedFS); else shared
//	shared  no pinning: the server takes its CPU from the job's cores
//	LIST    CPUs by number, as taskset takes them: "1", "2,3", "2-3"
const (
	serverCPUsAuto   = "auto"
	serverCPUsShared = "shared"
)

// cpuSplit is how the store suite's CPUs are divided: the server's and the
// job's, both sorted; empty when they are shared.
type cpuSplit struct {
	Server, Job []int
}

// planCPUs divides the CPUs this process may use by the flag's value spec.
// A server in this process (gofakes3) cannot be pinned apart from the job,
// so auto shares then, and a list is an error.
func planCPUs(spec string, childServer bool) (cpuSplit, error) {
	if spec == serverCPUsShared {
		return cpuSplit{}, nil
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return cpuSplit{}, fmt.Errorf("--store-server-cpus: the CPUs this process may use: %w", err)
	}
	cpus := cpuList(&allowed)
	var server []int
	switch spec {
	case serverCPUsAuto, "":
		if !childServer || len(cpus) < 2 {
			return cpuSplit{}, nil
		}
		server = cpus[len(cpus)-1:]
	default:
		if !childServer {
			return cpuSplit{}, fmt.Errorf("--store-server-cpus %s: the S3 server is gofakes3, in this process, so it cannot run on CPUs of its own", spec)
		}
		var err error
		if server, err = parseCPUList(spec); err != nil {
			return cpuSplit{}, fmt.Errorf("--store-server-cpus: %w", err)
		}
	}
	var split cpuSplit
	for _, c := range cpus {
		if slices.Contains(server, c) {
			split.Server = append(split.Server, c)
		} else {
			split.Job = append(split.Job, c)
		}
	}
	if len(split.Server) != len(server) {
		return cpuSplit{}, fmt.Errorf("--store-server-cpus %s: this process may use only CPUs %s", spec, formatCPUs(cpus))
	}
	if len(split.Job) == 0 {
		return cpuSplit{}, fmt.Errorf("--store-server-cpus %s: no CPU is left for the job (this process may use %s)", spec, formatCPUs(cpus))
	}
	return split, nil
}

// parseCPUList parses a list of CPU numbers and ranges: "1", "0,2", "2-3".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		first, err := strconv.Atoi(lo)
		last := first
		if err == nil && isRange {
			last, err = strconv.Atoi(hi)
		}
		if err != nil || first < 0 || last < first {
			return nil, fmt.Errorf("%q is not a CPU list (want numbers and ranges, as \"1\", \"0,2\" or \"2-3\")", s)
		}
		for c := first; c <= last; c++ {
			if !slices.Contains(cpus, c) {
				cpus = append(cpus, c)
			}
		}
	}
	return cpus, nil
}

// formatCPUs writes CPU numbers as a list parseCPUList reads.
func formatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

func cpuList(set *unix.CPUSet) []int {
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

func cpuSet(cpus []int) *unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return &set
}

// startOn starts cmd with its process bound to cpus (all of this process's
// when cpus is empty). The child is forked from a thread bound to them, so
// it starts bound, before any thread of its own; that thread then exits.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.SchedSetaffinity(0, cpuSet(cpus)); err != nil {
			started <- fmt.Errorf("bind a thread to CPUs %s: %w", formatCPUs(cpus), err)
			return
		}
		started <- cmd.Start()
	}()
	return <-started
}

// bindProcess binds every thread of this process to cpus and sets
// GOMAXPROCS to their number. It returns a function that binds them back
// to the CPUs they had and restores GOMAXPROCS.
func bindProcess(cpus []int) (restore func() error, err error) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		return nil, err
	}
	if err := bindThreads(cpuSet(cpus)); err != nil {
		bindThreads(&before)
		return nil, fmt.Errorf("bind the bench to CPUs %s: %w", formatCPUs(cpus), err)
	}
	procs := runtime.GOMAXPROCS(len(cpus))
	return func() error {
		runtime.GOMAXPROCS(procs)
		return bindThreads(&before)
	}, nil
}

// bindThreads sets the affinity of each of this process's threads, until a
// pass over /proc/self/task finds none it has not set: a thread started
// meanwhile by one already set inherits the set, and one started by a
// thread not yet set is in the next pass.
func bindThreads(set *unix.CPUSet) error {
	done := map[int]bool{}
	for {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			done[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}
