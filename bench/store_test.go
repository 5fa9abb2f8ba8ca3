package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-db/strata/columnar/store"
	"golang.org/x/sys/unix"
)

// keepS3Env restores the AWS variables startS3Server sets when the test
// ends.
func keepS3Env(t *testing.T) {
	for _, kv := range s3Env {
		k, _, _ := strings.Cut(kv, "=")
		t.Setenv(k, os.Getenv(k))
	}
}

// The store suite runs gofakes3 without a weed binary, and when the one
// it names does not start, saying why.
func TestStoreServerWithoutWeed(t *testing.T) {
	keepS3Env(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	broken := filepath.Join(t.TempDir(), "weed")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho no such server >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ weed, why string }{
		{"", ""},
		{filepath.Join(t.TempDir(), "absent"), ""},
		{broken, broken + " did not start"},
	} {
		srv, err := startS3Server(t.Context(), log, "strata-bench", c.weed, t.TempDir(), serverCPUsAuto)
		if err != nil {
			t.Fatalf("weed %q: %v", c.weed, err)
		}
		if srv.name != serverGofakes3 || !strings.HasPrefix(srv.desc, "gofakes3 ") || !strings.Contains(srv.desc, c.why) {
			t.Errorf("weed %q: server %s, %q", c.weed, srv.name, srv.desc)
		}
		roundTrip(t, srv)
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	}
}

// With the repository's bin/weed built, the store suite runs SeaweedFS on
// free ports under its directory, and stopping it ends the process and
// removes its data.
func TestStoreServerSeaweedFS(t *testing.T) {
	weed := filepath.Join("..", "bin", "weed")
	if _, err := os.Stat(weed); err != nil {
		t.Skipf("no %s (make local S3=1 builds it)", weed)
	}
	if testing.Short() {
		t.Skip("starts SeaweedFS (about 5s)")
	}
	keepS3Env(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	srv, err := startS3Server(t.Context(), log, "strata-bench", weed, dir, serverCPUsAuto)
	if err != nil {
		t.Fatal(err)
	}
	if srv.name != serverSeaweedFS || !strings.HasPrefix(srv.desc, "SeaweedFS (`weed version ") {
		t.Errorf("server %s, %q", srv.name, srv.desc)
	}
	roundTrip(t, srv)
	// Given two CPUs or more, weed runs on the last one: every thread of
	// it, each started after it was bound.
	if cpus := allowedCPUs(t); len(cpus) > 1 {
		want := cpus[len(cpus)-1:]
		if !slices.Equal(srv.cpus.Server, want) || !slices.Equal(srv.cpus.Job, cpus[:len(cpus)-1]) {
			t.Errorf("CPUs %+v, want the server on %v", srv.cpus, want)
		}
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", srv.pid))
		if err != nil || len(tasks) < 2 {
			t.Fatalf("weed's threads: %d, %v", len(tasks), err)
		}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &set); err != nil {
				t.Fatal(err)
			}
			if got := cpuList(&set); !slices.Equal(got, want) {
				t.Errorf("weed's thread %d may use CPUs %v, want %v", tid, got, want)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d entries in the scratch directory, want SeaweedFS's", len(entries))
	}
	if err := srv.Close(); err != nil {
		t.Error(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("SeaweedFS's directory left after it stopped: %v", entries)
	}
	if err := listBucket(context.Background(), srv.url); err == nil {
		t.Error("the S3 port still answers after stop")
	}
}

// roundTrip puts an object as a commit does (only if absent, twice), lists
// it, reads it and deletes it.
func roundTrip(t *testing.T, srv *s3Server) {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, srv.url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutReader(ctx, "t/p/c/commit", strings.NewReader("a1\n"), store.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutReader(ctx, "t/p/c/commit", strings.NewReader("a2\n"), store.PutOptions{IfAbsent: true}); !errors.Is(err, store.ErrExists) {
		t.Errorf("second conditional put: %v, want ErrExists", err)
	}
	objs, err := st.List(ctx, "t/")
	if err != nil || len(objs) != 1 {
		t.Fatalf("list: %v, %v", objs, err)
	}
	r, err := st.NewRangeReader(ctx, "t/p/c/commit", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(b) != "1\n" {
		t.Errorf("range read: %q, %v", b, err)
	}
	if err := st.DeletePrefix(ctx, "t/"); err != nil {
		t.Error(err)
	}
}
