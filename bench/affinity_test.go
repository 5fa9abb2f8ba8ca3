package main

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"1": {1}, "0,2": {0, 2}, "2-3": {2, 3}, " 1 , 3-4,1": {1, 3, 4}} {
		got, err := parseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
		if again, _ := parseCPUList(formatCPUs(got)); !slices.Equal(again, want) {
			t.Errorf("formatCPUs(%v) = %q reads back as %v", got, formatCPUs(got), again)
		}
	}
	for _, in := range []string{"", "a", "1-", "3-1", "-1", "1,,2"} {
		if got, err := parseCPUList(in); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", in, got)
		}
	}
}

// allowedCPUs are the CPUs this process's main thread may use.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	return cpuList(&set)
}

func TestPlanCPUs(t *testing.T) {
	cpus := allowedCPUs(t)
	last := cpus[len(cpus)-1]
	auto, err := planCPUs(serverCPUsAuto, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		if len(auto.Server)+len(auto.Job) != 0 {
			t.Errorf("auto on one CPU: %+v, want shared", auto)
		}
	} else if !slices.Equal(auto.Server, []int{last}) || !slices.Equal(auto.Job, cpus[:len(cpus)-1]) {
		t.Errorf("auto on CPUs %v: %+v, want the server on %d and the job on the rest", cpus, auto, last)
	}
	for _, c := range []struct {
		spec        string
		childServer bool
		why         string // "" when it is no error
	}{
		{serverCPUsShared, true, ""},
		{serverCPUsAuto, false, ""},
		{strconv.Itoa(last), false, "gofakes3"},
		{strconv.Itoa(last + 1), true, "may use only CPUs"},
		{formatCPUs(cpus), true, "no CPU is left for the job"},
		{"x", true, "not a CPU list"},
	} {
		split, err := planCPUs(c.spec, c.childServer)
		switch {
		case c.why == "" && (err != nil || len(split.Server)+len(split.Job) != 0):
			t.Errorf("planCPUs(%q, %v) = %+v, %v; want shared", c.spec, c.childServer, split, err)
		case c.why != "" && (err == nil || !strings.Contains(err.Error(), c.why)):
			t.Errorf("planCPUs(%q, %v) = %+v, %v; want an error saying %q", c.spec, c.childServer, split, err, c.why)
		}
	}
}

// A child started on some CPUs is bound to them from its start.
func TestStartOn(t *testing.T) {
	cpus := allowedCPUs(t)
	on := cpus[len(cpus)-1:]
	cmd := exec.Command("grep", "Cpus_allowed_list", "/proc/self/status")
	var out strings.Builder
	cmd.Stdout = &out
	if err := startOn(cmd, on); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	_, list, _ := strings.Cut(out.String(), ":")
	if got, err := parseCPUList(strings.TrimSpace(list)); err != nil || !slices.Equal(got, on) {
		t.Errorf("child's CPUs %q (%v), want %v", out.String(), err, on)
	}
	if got := allowedCPUs(t); !slices.Equal(got, cpus) {
		t.Errorf("after startOn this thread may use %v, want %v as before", got, cpus)
	}
}

// bindProcess binds every thread, those started later included, and its
// restore gives each its CPUs and GOMAXPROCS back.
func TestBindProcess(t *testing.T) {
	cpus := allowedCPUs(t)
	procs := runtime.GOMAXPROCS(0)
	on := cpus[:1]
	restore, err := bindProcess(on)
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d while bound to one CPU", got)
	}
	done := make(chan struct{})
	go func() { // a thread of its own, started after the bind
		runtime.LockOSThread()
		<-done
	}()
	threadCPUs := func() map[int][]int {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		m := map[int][]int{}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &set); err == nil {
				m[tid] = cpuList(&set)
			}
		}
		return m
	}
	for tid, got := range threadCPUs() {
		if !slices.Equal(got, on) {
			t.Errorf("thread %d may use CPUs %v while bound to %v", tid, got, on)
		}
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	close(done)
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after restore, want %d", got, procs)
	}
	for tid, got := range threadCPUs() {
		if !slices.Equal(got, cpus) {
			t.Errorf("thread %d may use CPUs %v after restore, want %v", tid, got, cpus)
		}
	}
}
