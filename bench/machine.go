package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
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
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func (m machine) String() string {
	return fmt.Sprintf("%s, %d cores, %.1f GiB", m.CPU, m.Cores, m.MemoryGiB)
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
