package columnar

import (
	"context"
	"errors"
	"testing"
)

// TestGenerateFirstID checks that FirstID names the containers without
// changing their rows, and that a second Generate into the same projection
// with the next numbers adds to it.
func TestGenerateFirstID(t *testing.T) {
	data := t.TempDir()
	opts := GenOptions{Columns: 3, Containers: 2, RowsPerContainer: 50, Seed: 7}
	first, err := Generate(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.FirstID = 2
	second, err := Generate(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"c0000", "c0001"} {
		if first[i].ID != want {
			t.Fatalf("first load: container %d is %s, want %s", i, first[i].ID, want)
		}
	}
	for i, want := range []string{"c0002", "c0003"} {
		m, err := ReadManifest(ContainerDir(data, "t", "p", want))
		if err != nil || second[i].ID != want || m.ID != want {
			t.Fatalf("second load: container %d is %s (manifest %v, %v), want %s", i, second[i].ID, m, err, want)
		}
		if m.Files[1].CRC != first[i].Files[1].CRC {
			t.Fatalf("%s: rows depend on the container's number", want)
		}
	}
	if got := ContainerID(12345); got != "c12345" {
		t.Fatalf("ContainerID(12345) = %s", got)
	}
	opts.FirstID = -1
	if _, err := Generate(data, opts); err == nil {
		t.Fatal("negative FirstID accepted")
	}
}

func TestGenerateProgressAndCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls [][2]int64
	opts := GenOptions{Columns: 2, Containers: 3, RowsPerContainer: 20, Context: ctx,
		Progress: func(n int, rows int64) {
			calls = append(calls, [2]int64{int64(n), rows})
			if n == 2 {
				cancel()
			}
		}}
	ms, err := Generate(t.TempDir(), opts)
	if !errors.Is(err, context.Canceled) || len(ms) != 2 {
		t.Fatalf("Generate = %d containers, %v; want 2 and context.Canceled", len(ms), err)
	}
	if len(calls) != 2 || calls[0] != [2]int64{1, 20} || calls[1] != [2]int64{2, 40} {
		t.Fatalf("progress calls %v", calls)
	}
}
