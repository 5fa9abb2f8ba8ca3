package service

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	v := Version("merger")
	if !strings.HasPrefix(v, "merger version ") || !strings.Contains(v, " commit ") || !strings.Contains(v, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("Version = %q", v)
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0}, {flag.ErrHelp, 0}, {ErrVersion, 0},
		{fmt.Errorf("%w: --x", ErrUsage), 2}, {errors.New("disk full"), 1},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("nats", "", "")
	fs.Bool("json", false, "")
	for _, tc := range []struct{ in, want []string }{
		{[]string{"--json"}, []string{"--json"}},
		{[]string{"FILE", "--nats", "u"}, []string{"--nats", "u", "--", "FILE"}},
		{[]string{"--nats=u", "a", "--json", "b"}, []string{"--nats=u", "--json", "--", "a", "b"}},
		{[]string{"a", "--", "--json"}, []string{"--", "a", "--json"}},
		{[]string{"-", "--nats"}, []string{"--nats", "--", "-"}},
	} {
		if got := Interspersed(fs, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Interspersed(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestParseHelpToStdout checks that -h prints to stdout and a bad flag to
// the flag set's output, as a usage error.
func TestParseHelpToStdout(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = f
	defer func() { os.Stdout = old }()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.String("nats", "", "the NATS URL")
	if err := Parse(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(-h) = %v, want flag.ErrHelp", err)
	}
	f.Close()
	if out, _ := os.ReadFile(f.Name()); !strings.Contains(string(out), "the NATS URL") {
		t.Errorf("-h printed %q to stdout, want the flags", out)
	}
	fs.SetOutput(io.Discard)
	if err := Parse(fs, []string{"--bogus"}); !errors.Is(err, ErrUsage) {
		t.Errorf("Parse(--bogus) = %v, want ErrUsage", err)
	}
	t.Setenv("STRATA_BAD_INT", "x")
	fs.Int("bad-int", 0, "")
	if err := Parse(fs, nil); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "STRATA_BAD_INT") {
		t.Errorf("Parse with a bad environment value = %v, want an ErrUsage naming the variable", err)
	}
}
