package service

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/internal/natsutil"
)

func parseCommon(t *testing.T, name string, args ...string) *Common {
	t.Helper()
	var c Common
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c.Register(fs, name, "")
	if err := Parse(fs, args); err != nil {
		t.Fatal(err)
	}
	return &c
}

func TestConnOptionsCredentials(t *testing.T) {
	data := t.TempDir()
	passwords, err := natsutil.EnsureCredentials(data)
	if err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_NATS_PASSWORD", "")
	os.Unsetenv("STRATA_NATS_PASSWORD")
	cases := []struct {
		name, bin       string
		args            []string
		env             string // STRATA_NATS_PASSWORD
		user, pw, inbox string
	}{
		{"the role's file in the data directory", "merger", []string{"--data", data}, "", "merger", passwords["merger"], "_INBOX.merger"},
		{"the CLI is cli-admin", "strata", []string{"--data", data}, "", "cli-admin", passwords["cli-admin"], "_INBOX.cli-admin"},
		{"a password file, user defaults to the role", "windower", []string{"--data", data, "--nats-password-file", pwFile}, "", "windower", "from-file", "_INBOX.windower"},
		{"user and password file", "strata", []string{"--nats-user", "producer", "--nats-password-file", pwFile}, "", "producer", "from-file", "_INBOX.producer"},
		{"the environment", "walwriter", []string{"--data", t.TempDir()}, "from-env", "walwriter", "from-env", "_INBOX.walwriter"},
		{"no credentials anywhere", "merger", []string{"--data", t.TempDir()}, "", "", "", "_INBOX.merger"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("STRATA_NATS_PASSWORD", c.env)
			}
			o, err := parseCommon(t, c.bin, c.args...).ConnOptions()
			if err != nil {
				t.Fatal(err)
			}
			if o.User != c.user || o.Password != c.pw || o.InboxPrefix != c.inbox {
				t.Errorf("user %q password %q inbox %q, want %q %q %q", o.User, o.Password, o.InboxPrefix, c.user, c.pw, c.inbox)
			}
		})
	}
	if _, err := parseCommon(t, "merger", "--nats-password-file", filepath.Join(t.TempDir(), "none")).ConnOptions(); err == nil {
		t.Error("a missing --nats-password-file was accepted")
	}
}

func TestFlagInArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--nats-password", "x"}, true},
		{[]string{"-nats-password=x"}, true},
		{[]string{"--nats-password-file", "f"}, false},
		{[]string{"--", "--nats-password"}, false},
		{nil, false},
	} {
		if got := FlagInArgs(c.args, "nats-password"); got != c.want {
			t.Errorf("FlagInArgs(%q) = %v", c.args, got)
		}
	}
}
