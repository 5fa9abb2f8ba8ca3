// Package systemd holds the tests of the shipped systemd units; the units
// themselves are the files beside this one.
package systemd

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/service"
)

var units = []string{"strata-scheduler.service", "strata-walwriter.service", "strata-merger@.service", "strata-windower@.service"}

// unitExecStart returns the ExecStart= line of a unit, continuation lines
// joined, as systemd reads it.
func unitExecStart(t *testing.T, unit string) string {
	t.Helper()
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	var line strings.Builder
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		if !in && !strings.HasPrefix(l, "ExecStart=") {
			continue
		}
		in = true
		if cut, ok := strings.CutSuffix(l, "\\"); ok {
			line.WriteString(cut + " ")
			continue
		}
		line.WriteString(l)
		break
	}
	if line.Len() == 0 {
		t.Fatalf("%s: no ExecStart=", unit)
	}
	return strings.TrimPrefix(line.String(), "ExecStart=")
}

// workerHTTP runs the worker unit's ExecStart for instance with the binary
// replaced by one printing STRATA_HTTP, and returns what it printed, or the
// error and stderr of a refused instance. env is the environment given to
// it (the unit's, as far as the port is concerned).
func workerHTTP(t *testing.T, unit, instance string, env ...string) (string, error) {
	t.Helper()
	return workerEnv(t, unit, instance, "STRATA_HTTP", env...)
}

// workerEnv is workerHTTP for any variable the ExecStart sets.
func workerEnv(t *testing.T, unit, instance, variable string, env ...string) (string, error) {
	t.Helper()
	cmd := unitExecStart(t, unit)
	// The specifiers and escapes systemd resolves before running it.
	cmd = strings.ReplaceAll(cmd, "%i", instance)
	cmd = strings.ReplaceAll(cmd, "$$", "$")
	bin := "/usr/local/bin/" + strings.TrimSuffix(unit, "@.service")[len("strata-"):]
	if !strings.Contains(cmd, "exec "+bin+"'") {
		t.Fatalf("%s: ExecStart does not exec %s: %s", unit, bin, cmd)
	}
	cmd = strings.Replace(cmd, "exec "+bin+"'", `exec printenv `+variable+`'`, 1)
	args := splitShell(t, cmd)
	c := exec.Command(args[0], args[1:]...)
	c.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", errors.New(strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// splitShell splits an ExecStart command line the way systemd does for
// the one form the units use: words, and single-quoted strings.
func splitShell(t *testing.T, s string) []string {
	t.Helper()
	var args []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				t.Fatalf("unterminated quote in %q", s)
			}
			args = append(args, s[1:1+end])
			s = s[end+2:]
			continue
		}
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		args = append(args, s[:end])
		s = s[end:]
	}
	return args
}

// Every instance 1..99 of every worker unit listens on its own port, above
// 1024 (the units run as an unprivileged user), and on loopback unless
// STRATA_HTTP says otherwise; other instance names are refused.
func TestWorkerPorts(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the units' ExecStart")
	}
	seen := map[int]string{9101: "strata-scheduler.service", 9104: "strata-walwriter.service"}
	for _, unit := range []string{"strata-merger@.service", "strata-windower@.service"} {
		for n := 1; n <= 99; n++ {
			for _, instance := range []string{strconv.Itoa(n), "0" + strconv.Itoa(n)} {
				if len(instance) > 2 {
					continue
				}
				addr, err := workerHTTP(t, unit, instance)
				if err != nil {
					t.Fatalf("%s instance %s: %v", unit, instance, err)
				}
				host, portText, err := net.SplitHostPort(addr)
				if err != nil {
					t.Fatalf("%s instance %s: STRATA_HTTP %q: %v", unit, instance, addr, err)
				}
				port, _ := strconv.Atoi(portText)
				if host != "127.0.0.1" || port <= 1024 || port > 65535 {
					t.Errorf("%s instance %s listens on %s; want 127.0.0.1 and a port above 1024", unit, instance, addr)
				}
				name := unit + " instance " + strconv.Itoa(n)
				if other, dup := seen[port]; dup && other != name {
					t.Errorf("%s and %s both listen on port %d", name, other, port)
				}
				seen[port] = name
			}
		}
		for _, bad := range []string{"0", "00", "100", "x", "1a", "-1", ""} {
			if addr, err := workerHTTP(t, unit, bad); err == nil {
				t.Errorf("%s instance %q started, listening on %s; want it refused", unit, bad, addr)
			} else if !strings.Contains(err.Error(), "from 1 to 99") {
				t.Errorf("%s instance %q refused with %q; want it to say the instance must be from 1 to 99", unit, bad, err)
			}
		}
		if addr, err := workerHTTP(t, unit, "3", "STRATA_HTTP=0.0.0.0:9999"); err != nil || addr != "0.0.0.0:9999" {
			t.Errorf("%s with STRATA_HTTP set: %q, %v; want the override kept", unit, addr, err)
		}
	}
}

// Every worker instance has a depot of its own under the data directory
// (a depot is locked by its worker: a second worker on the same one would
// not start), unless STRATA_DEPOT says otherwise.
func TestWorkerDepots(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the units' ExecStart")
	}
	seen := map[string]string{}
	for _, unit := range []string{"strata-merger@.service", "strata-windower@.service"} {
		for _, instance := range []string{"1", "2", "07", "99"} {
			depot, err := workerEnv(t, unit, instance, "STRATA_DEPOT", "STRATA_DATA=/srv/strata/data")
			if err != nil {
				t.Fatalf("%s instance %s: %v", unit, instance, err)
			}
			if !strings.HasPrefix(depot, "/srv/strata/data/depot/") {
				t.Errorf("%s instance %s: depot %q, want it under the data directory's depot/", unit, instance, depot)
			}
			if other, dup := seen[depot]; dup {
				t.Errorf("%s instance %s and %s share the depot %s", unit, instance, other, depot)
			}
			seen[depot] = unit + " instance " + instance
		}
		if depot, err := workerEnv(t, unit, "3", "STRATA_DEPOT", "STRATA_DEPOT=/cache/d3"); err != nil || depot != "/cache/d3" {
			t.Errorf("%s with STRATA_DEPOT set: %q, %v; want the override kept", unit, depot, err)
		}
	}
}

// hardening is what every unit sets, whatever the service.
var hardening = []string{
	"NoNewPrivileges=yes", "CapabilityBoundingSet=", "ProtectSystem=strict", "PrivateTmp=yes", "ProtectHome=yes",
	"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "ProtectKernelTunables=yes", "ProtectKernelModules=yes",
	"ProtectKernelLogs=yes", "SystemCallFilter=@system-service", "LockPersonality=yes", "MemoryDenyWriteExecute=yes",
	"RestrictNamespaces=yes", "User=strata",
}

// The units are sandboxed, and each may write what its service writes.
func TestUnitsHardened(t *testing.T) {
	writes := map[string]string{
		"strata-scheduler.service": "/srv/strata/data", // checks outputs, removes retired containers
		"strata-merger@.service":   "/srv/strata/data", // containers and spill
		"strata-windower@.service": "/srv/strata/data",
		"strata-walwriter.service": "/srv/strata/wal", // the WAL, fdatasync'ed
	}
	for _, unit := range units {
		data, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		has := func(l string) bool {
			for _, x := range lines {
				if x == l {
					return true
				}
			}
			return false
		}
		for _, h := range append(hardening, "ReadWritePaths="+writes[unit]) {
			if !has(h) {
				t.Errorf("%s: missing %s", unit, h)
			}
		}
	}
	env, err := os.ReadFile("strata.env")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(env), "\n") {
		if strings.HasPrefix(l, "STRATA_HTTP=") {
			t.Errorf("strata.env sets %s: every instance would take the one port", l)
		}
	}
}

// systemd-analyze verify accepts every unit, and systemd-analyze security
// rates each at most "OK" (exposure below 2.0).
func TestSystemdAnalyze(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the units are not verified here")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, unit := range units {
		data, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		// verify checks that ExecStart's binary exists: point it at stand-ins.
		name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(unit, "strata-"), ".service"), "@")
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("/usr/local/bin/"), []byte(bin+"/"))
		file := unit
		if strings.Contains(unit, "@.") {
			file = strings.Replace(unit, "@.", "@1.", 1) // an instance: a template alone is not verified
		}
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
		out, err = exec.Command(analyze, "security", "--offline=yes", "--no-pager", path).CombinedOutput()
		if err != nil {
			if bytes.Contains(out, []byte("offline")) || bytes.Contains(out, []byte("unrecognized option")) {
				t.Logf("systemd-analyze security --offline not supported here: %s", bytes.TrimSpace(out))
				continue
			}
			t.Errorf("systemd-analyze security %s: %v\n%s", unit, err, out)
			continue
		}
		level := exposure(out)
		t.Logf("%s: exposure %.1f", unit, level)
		if level < 0 || level >= 2.0 {
			t.Errorf("systemd-analyze security rates %s %.1f; want below 2.0\n%s", unit, level, out)
		}
	}
}

// exposure reads the overall exposure level from systemd-analyze
// security's output, or -1.
func exposure(out []byte) float64 {
	const marker = "Overall exposure level for "
	i := bytes.LastIndex(out, []byte(marker))
	if i < 0 {
		return -1
	}
	rest := string(out[i+len(marker):])
	_, after, ok := strings.Cut(rest, ": ")
	if !ok {
		return -1
	}
	f := strings.Fields(after)
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// strata.env sets STRATA_STORE, empty (containers in the data directory
// alone) until a deployment names a bucket, and no credentials; the units
// whose service keeps containers hand it the bucket's credentials file
// when there is one, and the walwriter, which keeps none, gets nothing.
func TestUnitsStore(t *testing.T) {
	if got := service.EnvName("store"); got != "STRATA_STORE" {
		t.Fatalf("--store is read from %s, not STRATA_STORE", got)
	}
	env, err := os.ReadFile("strata.env")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for _, l := range strings.Split(string(env), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			set[k] = v
		}
	}
	if v, ok := set["STRATA_STORE"]; !ok || v != "" {
		t.Errorf("strata.env: STRATA_STORE=%q (set %v); want it set and empty", v, ok)
	}
	for k := range set {
		if strings.HasPrefix(k, "AWS_") {
			t.Errorf("strata.env sets %s: credentials go to each unit as a credential, not to every service", k)
		}
	}
	creds := []string{
		"LoadCredential=aws-credentials:/etc/strata/credentials/aws",
		"Environment=AWS_SHARED_CREDENTIALS_FILE=%d/aws-credentials",
	}
	for _, unit := range units {
		data, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		// Every unit reaches the store: the walwriter archives its WAL there.
		for _, c := range creds {
			if !strings.Contains(string(data), "\n"+c+"\n") {
				t.Errorf("%s: %s missing", unit, c)
			}
		}
		// Without the file the unit still starts: the credential falls
		// back to a file that names no key (the AWS SDK then finds a role).
		if !strings.Contains(string(data), "\nSetCredential=aws-credentials:#") {
			t.Errorf("%s: no fallback for a missing credentials file", unit)
		}
	}
}
