package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
)

func TestAPICommandParseArg(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		format  string
		wantErr error
	}{
		{name: "leading", args: []string{"t1", "--format", "json"}, want: "t1", format: "json"},
		{name: "trailing", args: []string{"--format", "csv", "t2"}, want: "t2", format: "csv"},
		{name: "default format", args: []string{"t3"}, want: "t3", format: "table"},
		{name: "missing", args: []string{"--format", "json"}, wantErr: errUsage},
		{name: "blank", args: []string{"  "}, wantErr: errUsage},
		{name: "two trailing", args: []string{"--format", "json", "a", "b"}, wantErr: errUsage},
		{name: "bad format", args: []string{"t4", "--format", "xml"}, wantErr: errUsage},
		{name: "help", args: []string{"-h"}, wantErr: flag.ErrHelp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newAPICommand("test", "usage: strata test TABLE", formatUsage)
			cmd.fs.SetOutput(io.Discard)
			got, err := cmd.parseArg(tc.args, "want a TABLE")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("parseArg(%q) error = %v, want %v", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseArg(%q): %v", tc.args, err)
			}
			if got != tc.want || cmd.format != tc.format {
				t.Fatalf("parseArg(%q) = %q with --format %q, want %q with %q", tc.args, got, cmd.format, tc.want, tc.format)
			}
		})
	}
}

func TestCmdLineParseFile(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr bool
	}{
		{args: []string{"jobs.rec"}, want: "jobs.rec"},
		{args: []string{"--nats", "nats://h:4222", "jobs.rec"}, want: "jobs.rec"},
		{args: nil, wantErr: true},
		{args: []string{"a", "b"}, wantErr: true},
	} {
		cmd := newCmdLine("test", "usage: strata test FILE")
		var nf natsFlags
		nf.register(cmd.fs)
		cmd.fs.SetOutput(io.Discard)
		got, err := cmd.parseFile(tc.args)
		if tc.wantErr {
			if !errors.Is(err, errUsage) {
				t.Errorf("parseFile(%q) error = %v, want a usage error", tc.args, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseFile(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

func TestParseArgsFlagsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		format  string
		verbose bool
	}{
		{args: []string{"t", "c1", "c2"}, pos: []string{"t", "c1", "c2"}, format: "table"},
		{args: []string{"t", "--format", "json", "c1"}, pos: []string{"t", "c1"}, format: "json"},
		{args: []string{"--format=csv", "t", "c1", "-v", "c2"}, pos: []string{"t", "c1", "c2"}, format: "csv", verbose: true},
		{args: []string{"t", "--", "--format", "c1"}, pos: []string{"t", "--format", "c1"}, format: "table"},
	} {
		cmd := newAPICommand("test", "", formatUsage)
		verbose := cmd.fs.Bool("v", false, "")
		pos, err := cmd.parseArgs(tc.args)
		if err != nil {
			t.Fatalf("parseArgs(%q): %v", tc.args, err)
		}
		if !slices.Equal(pos, tc.pos) || cmd.format != tc.format || *verbose != tc.verbose {
			t.Errorf("parseArgs(%q) = %q, format %q, -v %v; want %q, %q, %v", tc.args, pos, cmd.format, *verbose, tc.pos, tc.format, tc.verbose)
		}
	}
}
