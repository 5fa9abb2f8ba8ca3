// Package local holds the tests of deploy/local/run.sh (`make local`),
// which run the script itself with stand-ins for the binaries: this test
// binary, started under each binary's name, listening where a server must
// listen, writing where a service writes, and failing when told to.
package local

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The binaries run.sh starts, which the test binary stands in for.
var standIns = []string{"nats-server", "weed", "strata", "scheduler", "merger", "windower", "walwriter"}

func TestMain(m *testing.M) {
	if name := filepath.Base(os.Args[0]); slices.Contains(standIns, name) {
		os.Exit(standIn(name, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// flagValue returns the value of flag name in args (-name=v, --name=v,
// -name v or --name v), or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// standIn is a binary run.sh starts: it prints its command line (into its
// log), records its pid in $FAKE_STATE/pids, writes a file where the real
// one keeps its data, listens where a server listens, and runs until
// SIGTERM (status 0) or, on the first start of a worker named in
// $FAKE_FAIL ("merger-1:1,merger-2:2"), exits with that status. A worker
// named in $FAKE_DEAF ("walwriter-1:2") lets that many SIGTERMs pass
// first, as a process does that is sent one before it runs its program
// (forked by the shell, its handlers still the shell's); "walwriter-1:-1"
// lets them all pass.
func standIn(name string, args []string) int {
	fmt.Printf("%s %s\n", name, strings.Join(args, " "))
	state := os.Getenv("FAKE_STATE")
	appendLine(filepath.Join(state, "pids"), strconv.Itoa(os.Getpid()))
	touch := func(dir, file string) {
		if dir == "" {
			return
		}
		if err := os.MkdirAll(dir, 0o755); err == nil {
			os.WriteFile(filepath.Join(dir, file), []byte(name+"\n"), 0o644)
		}
	}
	listen := func(port string) net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return l
	}
	var ln net.Listener
	switch name {
	case "strata":
		// auth server-config --data DIR: the passwords, and a configuration.
		data := flagValue(args, "data")
		if err := os.MkdirAll(filepath.Join(data, "nats-auth"), 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, role := range []string{"scheduler", "merger", "windower", "walwriter", "cli-admin", "producer"} {
			os.WriteFile(filepath.Join(data, "nats-auth", role+".password"), []byte("secret\n"), 0o600)
		}
		fmt.Println("authorization {}")
		return 0
	case "nats-server":
		touch(flagValue(args, "store_dir"), "stream")
		ln = listen(flagValue(args, "port"))
	case "weed":
		touch(flagValue(args, "dir"), "volume")
		ln = listen(flagValue(args, "s3.port"))
	default:
		worker := flagValue(args, "worker")
		if worker == "" {
			worker = name
		}
		touch(flagValue(args, "data"), worker)
		touch(flagValue(args, "wal"), "segment")
		starts := appendLine(filepath.Join(state, worker+".starts"), "start")
		if status, ok := fakeFor("FAKE_FAIL", worker); ok && starts == 1 {
			time.Sleep(100 * time.Millisecond)
			return status
		}
	}
	if ln != nil {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	deaf, _ := fakeFor("FAKE_DEAF", flagValue(args, "worker"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("waiting for SIGTERM")
	for ; ; deaf-- {
		<-sig
		if deaf == 0 {
			return 0
		}
		fmt.Println("SIGTERM missed")
	}
}

// fakeFor returns the number the environment variable env gives worker
// ("merger-1:1,merger-2:2"), and whether it names worker.
func fakeFor(env, worker string) (int, bool) {
	for _, f := range strings.Split(os.Getenv(env), ",") {
		if w, n, _ := strings.Cut(f, ":"); w != "" && w == worker {
			v, _ := strconv.Atoi(n)
			return v, true
		}
	}
	return 0, false
}

// appendLine appends line to file and returns how many lines it holds.
func appendLine(file, line string) int {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, line)
		f.Close()
	}
	data, _ := os.ReadFile(file)
	return bytes.Count(data, []byte("\n"))
}

// needTools skips the test without bash 5.1 (run.sh's supervise) or git.
func needTools(t *testing.T) {
	t.Helper()
	out, err := exec.Command("bash", "-c", `echo "${BASH_VERSINFO[0]} ${BASH_VERSINFO[1]}"`).Output()
	if err != nil {
		t.Skipf("no bash: %v", err)
	}
	var major, minor int
	if _, err := fmt.Sscan(string(out), &major, &minor); err != nil || major < 5 || (major == 5 && minor < 1) {
		t.Skipf("bash %s: run.sh needs 5.1 or newer", strings.TrimSpace(string(out)))
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
}

// freePort returns a port nothing listens on now, with the 99 above it
// in range.
func freePort(t *testing.T) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+99 <= 65535 {
			return port
		}
	}
}

// checkout makes a git work tree in a temporary directory holding what
// run.sh needs of the repository (.gitignore, deploy/lib.sh,
// deploy/local/run.sh) and bin/ with the stand-ins, and returns it.
func checkout(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	git(t, root, "init", "-q")
	for _, f := range []string{".gitignore", "deploy/lib.sh", "deploy/local/run.sh"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range standIns {
		if err := os.Symlink(self, filepath.Join(root, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// untracked returns git's view of the files in root that are neither
// tracked nor ignored.
func untracked(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, l := range strings.Split(git(t, root, "status", "--porcelain", "--untracked-files=all"), "\n") {
		if l != "" {
			files = append(files, l)
		}
	}
	return files
}

// script is a running run.sh.
type script struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder
	ended  chan struct{}
	status error
}

func startScript(t *testing.T, root string, env ...string) *script {
	t.Helper()
	cmd := exec.Command("bash", "deploy/local/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	s := &script{t: t, cmd: cmd, ended: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	go func() {
		s.status = cmd.Wait()
		pw.Close()
		close(s.ended)
	}()
	t.Cleanup(func() {
		select {
		case <-s.ended:
		default:
			cmd.Process.Kill()
			<-s.ended
		}
	})
	return s
}

func (s *script) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// waitFor waits up to 20s for the script's output to match re.
func (s *script) waitFor(re string) {
	s.t.Helper()
	r := regexp.MustCompile(re)
	deadline := time.Now().Add(20 * time.Second)
	for !r.MatchString(s.text()) {
		select {
		case <-s.ended:
			s.t.Fatalf("run.sh ended (%v) before printing %q:\n%s", s.status, re, s.text())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("after 20s run.sh has not printed %q:\n%s", re, s.text())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM, as a Ctrl-C would end it, and waits for the script.
func (s *script) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.ended:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("run.sh still running 30s after SIGTERM:\n%s", s.text())
	}
	if s.status != nil {
		s.t.Errorf("run.sh after SIGTERM: %v, want status 0:\n%s", s.status, s.text())
	}
}

// checkAllStopped fails if a stand-in that run.sh started still runs.
func checkAllStopped(t *testing.T, state string) {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(state, "pids"))
	pids := strings.Fields(string(data))
	if len(pids) == 0 {
		t.Fatal("no process recorded its pid")
	}
	for _, p := range pids {
		pid, _ := strconv.Atoi(p)
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("pid %d still runs after run.sh stopped", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestRunRestartsFailedWorkers runs `make local`'s script with S3=1 and
// stand-ins: it restarts a worker that fails, leaves one stopped that exits
// with the status its unit does not restart, says both, gives every
// process its port from PORT_BASE, stops everything on SIGTERM, appends
// its logs across runs, and writes nothing git would pick up.
func TestRunRestartsFailedWorkers(t *testing.T) {
	needTools(t)
	root := checkout(t)
	before := untracked(t, root)
	state := t.TempDir()
	base, s3 := freePort(t), freePort(t)
	env := []string{
		"FAKE_STATE=" + state, "FAKE_FAIL=merger-1:1,windower-1:2",
		"PORT_BASE=" + strconv.Itoa(base), "S3_PORT=" + strconv.Itoa(s3), "S3=1",
		"MERGERS=2", "WINDOWERS=1", "WALWRITERS=1",
		"STRATA_DIR=", "BIN=", "WEED=", "NATS_PORT=", // the defaults
	}
	s := startScript(t, root, env...)
	s.waitFor(`strata is running on nats://127\.0\.0\.1:` + strconv.Itoa(base))
	s.waitFor(`merger-1 exited \(status 1\); restarting in 1s`)
	s.waitFor(`windower-1 exited \(status 2\); not restarting it \(RestartPreventExitStatus=2, as the systemd unit of windower\)`)
	s.waitFor(`(?s)restarting in 1s.*started merger-1 \(pid`)
	s.stop()
	checkAllStopped(t, state)
	out := s.text()
	t.Logf("run.sh:\n%s", out)
	// Stopped newest first, NATS last.
	if i, j := strings.LastIndex(out, "stopped merger-1"), strings.LastIndex(out, "stopped nats-server"); i < 0 || j < i {
		t.Errorf("stop order: merger-1 at %d, nats-server at %d", i, j)
	}

	logs := filepath.Join(root, "local-run", "logs")
	readLog := func(name string) string {
		data, err := os.ReadFile(filepath.Join(logs, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// Every port from PORT_BASE, but those overridden.
	for name, want := range map[string]string{
		"nats-server": fmt.Sprintf("--port %d", base),
		"scheduler":   fmt.Sprintf("--http 127.0.0.1:%d", base+1),
		"merger-1":    fmt.Sprintf("--http 127.0.0.1:%d", base+21),
		"merger-2":    fmt.Sprintf("--http 127.0.0.1:%d", base+22),
		"windower-1":  fmt.Sprintf("--http 127.0.0.1:%d", base+51),
		"walwriter-1": fmt.Sprintf("--http 127.0.0.1:%d", base+81),
		"seaweedfs": fmt.Sprintf("-s3.port=%d -s3.port.grpc=%d -master.port=%d -master.port.grpc=%d -volume.port=%d -volume.port.grpc=%d -filer.port=%d -filer.port.grpc=%d -admin.port=%d -admin.port.grpc=%d -admin.port.legacy=0",
			s3, base+3, base+4, base+5, base+6, base+7, base+8, base+9, base+10, base+11),
	} {
		if l := readLog(name); !strings.Contains(l, want) {
			t.Errorf("%s.log lacks %q:\n%s", name, want, l)
		}
	}
	m1 := readLog("merger-1")
	if n := strings.Count(m1, "run.sh: starting merger-1"); n != 2 {
		t.Errorf("merger-1.log: %d starts, want 2 (the first and the restart):\n%s", n, m1)
	}
	if !strings.Contains(m1, "run.sh: merger-1 exited (status 1); restarting in 1s") {
		t.Errorf("merger-1.log does not say it was restarted:\n%s", m1)
	}

	// A second run appends to the logs of the first.
	s = startScript(t, root, env...)
	s.waitFor(`strata is running`)
	s.stop()
	checkAllStopped(t, state)
	if n := strings.Count(readLog("merger-2"), "run.sh: starting merger-2"); n != 2 {
		t.Errorf("merger-2.log after two runs: %d starts, want 2", n)
	}

	// Nothing git would take: the passwords, s3.env, data and logs are all
	// in ignored directories.
	for _, f := range []string{"local-run/s3.env", "local-run/data/nats-auth/merger.password", "local-run/nats-auth.conf", "local-run/logs/nats-server.log"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("run.sh did not write %s: %v", f, err)
		}
	}
	if after := untracked(t, root); !slices.Equal(before, after) {
		t.Errorf("run.sh left files git does not ignore:\nbefore %q\nafter  %q", before, after)
	}
}

// TestRunStopsCleanlyWithoutS3 runs the script without S3 and the
// defaults but for the base port: NATS on PORT_BASE unless NATS_PORT, a
// worker that exits cleanly stays stopped, SIGTERM stops the rest.
func TestRunStopsCleanlyWithoutS3(t *testing.T) {
	needTools(t)
	root := checkout(t)
	before := untracked(t, root)
	state := t.TempDir()
	base, nats := freePort(t), freePort(t)
	s := startScript(t, root, "FAKE_STATE="+state, "FAKE_FAIL=merger-2:0", "PORT_BASE="+strconv.Itoa(base), "NATS_PORT="+strconv.Itoa(nats),
		"S3=", "MERGERS=", "WINDOWERS=", "WALWRITERS=", "STRATA_DIR=", "BIN=")
	s.waitFor(`strata is running on nats://127\.0\.0\.1:` + strconv.Itoa(nats))
	s.waitFor(`merger-2 exited \(status 0\); not restarting it \(a clean exit\)`)
	s.stop()
	checkAllStopped(t, state)
	if strings.Contains(s.text(), "weed") || strings.Contains(s.text(), "seaweedfs") {
		t.Errorf("SeaweedFS started without S3=1:\n%s", s.text())
	}
	if _, err := os.Stat(filepath.Join(root, "local-run", "s3.env")); err == nil {
		t.Error("s3.env written without S3=1")
	}
	if after := untracked(t, root); !slices.Equal(before, after) {
		t.Errorf("run.sh left files git does not ignore:\nbefore %q\nafter  %q", before, after)
	}
}

// TestRunStopsProcessesThatMissSIGTERM: a process that misses the
// SIGTERM stopping it (one sent while the shell had forked it and not
// yet started its program is lost) gets another a second later, and one
// that never stops is killed after STOP_TIMEOUT seconds, as systemd kills
// one after TimeoutStopSec. Before, run.sh waited for such a process
// for ever.
func TestRunStopsProcessesThatMissSIGTERM(t *testing.T) {
	needTools(t)
	root := checkout(t)
	state := t.TempDir()
	base, nats := freePort(t), freePort(t)
	s := startScript(t, root, "FAKE_STATE="+state, "FAKE_FAIL=", "FAKE_DEAF=walwriter-1:2,merger-2:-1", "STOP_TIMEOUT=3",
		"PORT_BASE="+strconv.Itoa(base), "NATS_PORT="+strconv.Itoa(nats),
		"S3=", "MERGERS=", "WINDOWERS=", "WALWRITERS=", "STRATA_DIR=", "BIN=")
	s.waitFor(`strata is running on nats://127\.0\.0\.1:` + strconv.Itoa(nats))
	logs := filepath.Join(root, "local-run", "logs")
	for _, name := range []string{"walwriter-1", "merger-2"} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if l, _ := os.ReadFile(filepath.Join(logs, name+".log")); strings.Contains(string(l), "waiting for SIGTERM") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never waited for SIGTERM", name)
			}
		}
	}
	s.stop()
	checkAllStopped(t, state)
	out := s.text()
	for _, want := range []string{
		"stopped walwriter-1\n",
		"merger-2 still running 3s after SIGTERM; sending SIGKILL\n",
		"stopped merger-2 (exit status 137)\n",
		"stopped nats-server\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("run.sh does not say %q:\n%s", want, out)
		}
	}
	if l, _ := os.ReadFile(filepath.Join(logs, "walwriter-1.log")); strings.Count(string(l), "SIGTERM missed") != 2 {
		t.Errorf("walwriter-1 missed %d SIGTERMs, want 2:\n%s", strings.Count(string(l), "SIGTERM missed"), l)
	}
}

// TestRunRefusesBadPorts: a PORT_BASE whose range does not fit, and too
// many workers for their port ranges, are usage errors before anything
// starts.
func TestRunRefusesBadPorts(t *testing.T) {
	needTools(t)
	root := checkout(t)
	for _, env := range [][]string{{"PORT_BASE=65500"}, {"PORT_BASE=80"}, {"PORT_BASE=x"}, {"MERGERS=30"}, {"WALWRITERS=20"}} {
		cmd := exec.Command("bash", "deploy/local/run.sh")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want status 2:\n%s", env, err, out)
		}
		if _, err := os.Stat(filepath.Join(root, "local-run")); err == nil {
			t.Errorf("%v: local-run made before the usage error", env)
		}
	}
}

// TestRestartPolicyMatchesSystemd: run.sh restarts as the systemd units
// do: every unit restarts on failure (what supervise does), and the exit
// statuses that prevent a restart are the same per role.
func TestRestartPolicyMatchesSystemd(t *testing.T) {
	units, err := filepath.Glob(filepath.Join("..", "systemd", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units: %v", err)
	}
	want := map[string]string{}
	for _, u := range units {
		data, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		role := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(u), "strata-"), ".service"), "@")
		restart := ""
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "Restart="); ok {
				restart = v
			}
			if v, ok := strings.CutPrefix(l, "RestartPreventExitStatus="); ok {
				want[role] = v
			}
		}
		if restart != "on-failure" {
			t.Errorf("%s: Restart=%s; run.sh's supervise restarts as on-failure does", u, restart)
		}
	}
	script, err := os.ReadFile("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RESTART_PREVENT_EXIT_STATUS=\((.*)\)$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("run.sh sets no RESTART_PREVENT_EXIT_STATUS")
	}
	got := map[string]string{}
	for _, kv := range regexp.MustCompile(`\[([a-z]+)\]=([0-9]+)`).FindAllSubmatch(m[1], -1) {
		got[string(kv[1])] = string(kv[2])
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("run.sh RESTART_PREVENT_EXIT_STATUS %v, the units' RestartPreventExitStatus= %v", got, want)
	}
}
