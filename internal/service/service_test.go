package service

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{"nats": "STRATA_NATS", "log-format": "STRATA_LOG_FORMAT", "data": "STRATA_DATA"} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseTakesEnvUnlessFlagGiven(t *testing.T) {
	t.Setenv("STRATA_DATA", "/srv/strata")
	t.Setenv("STRATA_LOG_FORMAT", "json")
	t.Setenv("STRATA_STOP_GRACE", "not-a-duration")
	var c Common
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.Register(fs, "merger", ":0")
	err := Parse(fs, []string{"--log-format", "text"})
	if err == nil || !strings.Contains(err.Error(), "STRATA_STOP_GRACE") {
		t.Fatalf("bad environment value: err = %v, want one naming STRATA_STOP_GRACE", err)
	}
	t.Setenv("STRATA_STOP_GRACE", "5s")
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	c = Common{}
	c.Register(fs, "merger", ":0")
	if err := Parse(fs, []string{"--log-format", "text"}); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/srv/strata" {
		t.Errorf("DataDir = %q, want it from STRATA_DATA", c.DataDir)
	}
	if c.LogFormat != "text" {
		t.Errorf("LogFormat = %q, want the command line's text over the environment's json", c.LogFormat)
	}
	if c.StopGrace.String() != "5s" {
		t.Errorf("StopGrace = %v", c.StopGrace)
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), `"msg":"shown"`) {
		t.Errorf("json warn logger wrote %q", buf.String())
	}
	if _, err := NewLogger(io.Discard, "xml", "info"); err == nil {
		t.Error("format xml accepted")
	}
	if _, err := NewLogger(io.Discard, "text", "loud"); err == nil {
		t.Error("level loud accepted")
	}
}

func TestRunnerServesHealthAndStops(t *testing.T) {
	log, _ := NewLogger(io.Discard, "text", "error")
	r := NewRunner("test", log)
	var broken atomic.Bool
	r.AddCheck("thing", func() error {
		if broken.Load() {
			return errors.New("broken")
		}
		return nil
	})
	addr := make(chan string, 1)
	stop := make(chan struct{})
	r.Add(func() error { <-stop; return nil }, func(error) {})
	done := make(chan error, 1)
	go func() { done <- r.runWithAddr("127.0.0.1:0", addr) }()
	base := "http://" + <-addr
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, "thing: ok") {
		t.Errorf("/healthz = %d %q", code, body)
	}
	broken.Store(true)
	if code, body := get("/healthz"); code != 503 || !strings.Contains(body, "broken") {
		t.Errorf("unhealthy /healthz = %d %q", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d, missing go_goroutines", code)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
