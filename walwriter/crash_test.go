package walwriter

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var soak = flag.Bool("wal.soak", false, "run the crash test for many more kills")

const (
	crashDirEnv = "WALWRITER_CRASH_DIR"
	crashRunEnv = "WALWRITER_CRASH_RUN"
)

// TestMain turns the test binary into the crash test's child when asked.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		run, _ := strconv.Atoi(os.Getenv(crashRunEnv))
		if err := crashChild(dir, run); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChild appends updates from 32 producers until killed, printing
// "ok <event ID>" for each one once it is durable. It first resends events
// of the previous run, which must not be written twice.
func crashChild(dir string, run int) error {
	w, err := Open(dir, Options{Tables: []Table{accounts}, SegmentSize: 512 << 10, MaxRowBytes: 4096})
	if err != nil {
		return err
	}
	durable := make(chan string, 1<<16)
	go func() {
		out := bufio.NewWriter(os.Stdout)
		for id := range durable {
			fmt.Fprintf(out, "ok %s\n", id)
			if len(durable) == 0 {
				out.Flush()
			}
		}
	}()
	errs := make(chan error, 32)
	for p := range 32 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(run), uint64(p)))
			for i := 0; ; i++ {
				id := fmt.Sprintf("r%d-p%d-%d", run, p, i)
				if run > 0 && i < 20 {
					id = fmt.Sprintf("r%d-p%d-%d", run-1, p, i) // a redelivery
				}
				k := int64(rng.IntN(200))
				row := accountRow(k, rng)
				if _, err := w.Append(context.Background(), Update{EventID: id, Table: "accounts", Key: key(k), Row: row}); err != nil {
					errs <- err
					return
				}
				durable <- id
			}
		}()
	}
	return <-errs
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	kills := 50
	if *soak {
		kills = 500
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	reported := map[string]bool{}
	for run := range kills {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRunEnv+"="+strconv.Itoa(run))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Let the child make some progress, then kill it at a random moment.
		first, ok := <-lines
		if !ok {
			cmd.Wait()
			t.Fatalf("run %d: child printed nothing: %s", run, stderr.String())
		}
		timer := time.After(time.Duration(rng.IntN(150)) * time.Millisecond)
		collect := func(l string) {
			if id, ok := strings.CutPrefix(l, "ok "); ok {
				reported[id] = true
			}
		}
		collect(first)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break wait
				}
				collect(l)
			case <-timer:
				cmd.Process.Signal(syscall.SIGKILL)
				timer = nil
			}
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("run %d: child ended by itself: %v: %s", run, err, stderr.String())
		}
	}

	// Reopen (recovery), then every reported event must be there exactly once.
	w := openTest(t, dir, Options{SegmentSize: 512 << 10, MaxRowBytes: 4096})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, rec := range readAll(t, dir, 0) {
		if rec.EventID == "" {
			continue // a checkpoint record: one per checkpoint, not an event
		}
		seen[rec.EventID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s written %d times", id, n)
		}
	}
	for id := range reported {
		if seen[id] != 1 {
			t.Errorf("reported durable event %s found %d times", id, seen[id])
		}
	}
	rep, err := Verify(dir)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	t.Logf("%d kills: %d events reported durable, %d records in %d segments, %d damaged tails kept",
		kills, len(reported), rep.Records, rep.Segments, len(rep.Broken))
	if len(reported) == 0 {
		t.Fatal("no event was reported durable")
	}
}
