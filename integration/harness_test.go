package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

// binDir holds the service binaries built by TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	root, err := filepath.Abs("..")
	if err == nil {
		err = buildBinaries(root, dir)
	}
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "build service binaries:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinaries builds every service that exists into dir.
func buildBinaries(root, dir string) error {
	var pkgs []string
	for _, b := range []string{"scheduler", "merger", "windower", "walwriter", "strata", "pgwire"} {
		if _, err := os.Stat(filepath.Join(root, "services", b, "main.go")); err == nil {
			pkgs = append(pkgs, "./services/"+b)
		}
	}
	args := append([]string{"build", "-o", dir + string(os.PathSeparator)}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// haveBinary reports whether service name was built.
func haveBinary(name string) bool {
	_, err := os.Stat(filepath.Join(binDir, name))
	return err == nil
}

// deployment is one NATS server and a data directory shared by the
// services the test starts.
type deployment struct {
	t       testing.TB
	dataDir string
	nats    *natsembed.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	topo    natsutil.Topology
}

// newDeployment starts a NATS server with JetStream and creates strata's
// streams, with a short job lease so redelivery tests run quickly.
func newDeployment(t testing.TB) *deployment {
	t.Helper()
	root := t.TempDir()
	srv := natstest.Server(t, natsembed.Options{DataDir: filepath.Join(root, "nats-server")})
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	d := &deployment{t: t, dataDir: filepath.Join(root, "data"), nats: srv, nc: nc, js: js, topo: natsutil.DefaultTopology()}
	d.topo.JobAckWait = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.topo.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// proc is a service running as its own OS process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	http    string
	done    chan struct{}
	err     error
	// expectViolations: lines of its log with these substrings are
	// permissions violations a test caused on purpose (startBinary).
	expectViolations []string
}

// start runs a service binary against the deployment. Its stderr goes to
// a log file that is printed if the test fails.
func (d *deployment) start(name, worker string, extra ...string) *proc {
	d.t.Helper()
	return d.startEnv(nil, name, worker, extra...)
}

// startEnv is start with env added to the process's environment.
func (d *deployment) startEnv(env []string, name, worker string, extra ...string) *proc {
	d.t.Helper()
	if !haveBinary(name) {
		d.t.Skipf("service %s is not built", name)
	}
	httpAddr := freeAddr(d.t)
	args := append([]string{
		"--nats", d.nats.ClientURL(), "--data", d.dataDir, "--http", httpAddr,
		"--worker", worker, "--log-level", "debug",
	}, extra...)
	// The harness ensured the topology with this lease; workers refuse a
	// lease flag that disagrees with their consumer's, so all get the same.
	args = append(args, "--job-ack-wait", d.topo.JobAckWait.String())
	logPath := filepath.Join(d.t.TempDir(), worker+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		d.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	p := &proc{name: worker, cmd: cmd, logPath: logPath, http: httpAddr, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); logFile.Close(); close(p.done) }()
	d.t.Cleanup(func() {
		p.stop(d.t)
		if d.t.Failed() {
			b, _ := os.ReadFile(logPath)
			d.t.Logf("---- log of %s ----\n%s", worker, tail(string(b), 60))
		}
	})
	p.waitHealthy(d.t)
	return p
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// waitHealthy waits until /healthz answers 200.
func (p *proc) waitHealthy(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("%s exited during start: %v", p.name, p.err)
		default:
		}
		resp, err := http.Get("http://" + p.http + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A Go process dumps every goroutine's stack on SIGQUIT: the log then
	// says where the start is stuck.
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
	}
	t.Fatalf("%s not healthy after 30s (its goroutines are dumped in %s)", p.name, p.logPath)
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for a graceful exit (SIGKILL after 30s).
func (p *proc) stop(t testing.TB) {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s: exit after SIGTERM: %v", p.name, p.err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

// kill sends SIGKILL and waits for the process to die.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// metric returns the sum of a Prometheus metric's samples whose labels
// contain every given label pair (`name="value"`).
func (p *proc) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, err := p.metricErr(name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// metricErr is metric returning the error of reading /metrics, for a
// goroutine other than the test's.
func (p *proc) metricErr(name string, labels ...string) (float64, error) {
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("%s /metrics: %w", p.name, err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		var v float64
		fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
		sum += v
	}
	return sum, sc.Err()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// publish publishes a message with a Nats-Msg-Id.
func (d *deployment) publish(subject, msgID string, m messages.Message) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := natsutil.Publish(ctx, d.js, subject, msgID, m); err != nil {
		d.t.Fatal(err)
	}
}

// publishRaw publishes bytes as they are.
func (d *deployment) publishRaw(subject string, data []byte) {
	d.t.Helper()
	if _, err := d.js.Publish(context.Background(), subject, data); err != nil {
		d.t.Fatal(err)
	}
}

// events follows EVENTS from the start.
type events struct {
	mu   sync.Mutex
	all  []*messages.JobEvent
	stop func()
}

func (d *deployment) watchEvents() *events {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := d.js.OrderedConsumer(ctx, messages.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		d.t.Fatal(err)
	}
	e := &events{}
	cc, err := c.Consume(func(msg jetstream.Msg) {
		ev := new(messages.JobEvent)
		if err := messages.Unmarshal(msg.Data(), ev); err != nil {
			return
		}
		e.mu.Lock()
		e.all = append(e.all, ev)
		e.mu.Unlock()
	})
	if err != nil {
		d.t.Fatal(err)
	}
	e.stop = func() { cc.Stop(); cancel() }
	d.t.Cleanup(e.stop)
	return e
}

// find returns the events matching f.
func (e *events) find(f func(*messages.JobEvent) bool) []*messages.JobEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*messages.JobEvent
	for _, ev := range e.all {
		if f(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// waitDone waits for a done (or final failed) event of every job and
// returns the done events by job ID.
func (e *events) waitDone(t testing.TB, timeout time.Duration, jobIDs ...string) map[string]*messages.JobEvent {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done := map[string]*messages.JobEvent{}
		for _, ev := range e.find(func(ev *messages.JobEvent) bool { return ev.Type == messages.EventDone }) {
			done[ev.JobID] = ev
		}
		for _, ev := range e.find(func(ev *messages.JobEvent) bool { return ev.Type == messages.EventFailed && !ev.Retryable }) {
			t.Fatalf("job %s failed: %s", ev.JobID, ev.Reason)
		}
		missing := 0
		for _, id := range jobIDs {
			if done[id] == nil {
				missing++
			}
		}
		if missing == 0 {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs not done after %v", missing, len(jobIDs), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
