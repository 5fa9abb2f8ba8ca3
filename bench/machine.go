package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// machine describes the host a run measured.
type machine struct {
	CPU       string
	Cores     int
	MemoryGiB float64
	OS        string
	Kernel    string
	Go        string
	// LoadStart and LoadEnd are the 1-minute load averages when the run
	// started and ended: above the core count, other work shared the CPUs
	// and every figure is slower than on an idle machine.
	LoadStart, LoadEnd float64
	// FaultMicros is what a process pays, in microseconds, the first time
	// it writes a 4KiB page of fresh memory (faultMicros); 0 where not
	// measured.
	FaultMicros float64 `json:",omitempty"`
}

func describeMachine(_ context.Context) machine {
	m := machine{
		CPU:   "unknown",
		Cores: runtime.NumCPU(),
		OS:    runtime.GOOS + "/" + runtime.GOARCH,
		Go:    runtime.Version(),
	}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.CPU = v
	}
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		// "24588032 kB"
		if kb, err := strconv.ParseFloat(strings.Fields(v)[0], 64); err == nil {
			m.MemoryGiB = kb / (1 << 20)
		}
	}
	if v := osRelease(); v != "" {
		m.OS = v + " " + runtime.GOARCH
	}
	m.LoadStart = loadAverage()
	m.FaultMicros = faultMicros()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func (m machine) String() string {
	s := fmt.Sprintf("%s, %d cores, %.1f GiB", m.CPU, m.Cores, m.MemoryGiB)
	if m.FaultMicros > 0 {
		s += fmt.Sprintf(", %.1fµs a page fault", m.FaultMicros)
	}
	return s
}

// faultMicros measures the cost of a page fault on fresh memory: the median
// over three fresh anonymous mappings of 64MiB, without huge pages, of
// the time to write one byte in each 4KiB page, per page. It is what a
// process pays for memory it has not touched before: a Go heap growing,
// a buffer the runtime takes from the kernel. On bare metal it is a
// fraction of a microsecond; on a virtual machine whose host backs guest
// memory only once touched, or takes back the pages the guest frees
// (a balloon device's free page reporting), it can be tens of times more,
// and every figure of a run that grows its memory moves with it. 0 if the
// mappings fail.
func faultMicros() float64 {
	const size, page = 64 << 20, 4 << 10
	var per []float64
	for range 3 {
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return 0
		}
		_ = unix.Madvise(b, unix.MADV_NOHUGEPAGE) // one fault a 4KiB page
		start := time.Now()
		for i := 0; i < size; i += page {
			b[i] = 1
		}
		per = append(per, float64(time.Since(start).Microseconds())/(size/page))
		if err := unix.Munmap(b); err != nil {
			return 0
		}
	}
	slices.Sort(per)
	return per[1]
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func osRelease() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// loadAverage is the 1-minute load average, or 0 where unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
