package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseBenchMergeout(t *testing.T) {
	cfg, err := parseBenchMergeout(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.widths) != 3 || cfg.containers != 32 || len(cfg.grants) != 4 || cfg.grants[0] != 32<<20 || cfg.grants[3] != 8<<30 {
		t.Errorf("defaults: %+v", cfg)
	}
	for _, args := range [][]string{
		{"--widths", "1"},
		{"--widths", "a,b"},
		{"--grants", "lots"},
		{"--containers", "0"},
		{"--rows", "-1"},
		{"--compression", "gzip"},
		{"extra"},
	} {
		if _, err := parseBenchMergeout(args); !errors.Is(err, errUsage) {
			t.Errorf("%q: err = %v, want a usage error", args, err)
		}
	}
}

func TestBenchMergeoutSmall(t *testing.T) {
	args := []string{"--widths", "3,6", "--containers", "4", "--rows", "300", "--block-rows", "64",
		"--grants", "256KiB,64MiB", "--dir", t.TempDir()}
	var out bytes.Buffer
	if err := runBenchMergeout(context.Background(), append(args, "--json"), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		var c mergeoutCase
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if c.TotalRows != 1200 || c.Seconds <= 0 || c.CodecFloorSeconds <= 0 || c.Plan == "" {
			t.Errorf("case %+v", c)
		}
		if c.PeakBytes > c.GrantBytes {
			t.Errorf("width %d grant %d: peak %d over the grant", c.Width, c.GrantBytes, c.PeakBytes)
		}
		if c.Passes == 1 && (c.BlocksDecompressed != c.BlocksTotal || c.FilesOpened != c.FilesExpected) {
			t.Errorf("width %d grant %d: %d/%d blocks, %d/%d files", c.Width, c.GrantBytes,
				c.BlocksDecompressed, c.BlocksTotal, c.FilesOpened, c.FilesExpected)
		}
	}
	out.Reset()
	if err := runBenchMergeout(context.Background(), args[:len(args)-2], &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "x floor") || strings.Count(out.String(), "\n") != 5 {
		t.Errorf("table:\n%s", out.String())
	}
}
