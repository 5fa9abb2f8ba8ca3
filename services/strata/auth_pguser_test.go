package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/internal/pgauth"
)

func TestAuthPgUser(t *testing.T) {
	data := t.TempDir()
	if err := runAuthPgUser(context.Background(), []string{"alice", "--role", "read", "--data", data}); err != nil {
		t.Fatal(err)
	}
	pw, err := os.ReadFile(pgauth.PasswordFile(data, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := pgauth.LoadUser(data, "alice")
	if err != nil || u.Role != pgauth.RoleRead {
		t.Fatal(u, err)
	}
	if got := pgauth.VerifierFromSalt(string(pw[:len(pw)-1]), u.Verifier.Salt, u.Verifier.Iterations); got.String() != u.Verifier.String() {
		t.Fatal("the verifier is not of the written password")
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := runAuthPgUser(context.Background(), []string{"bob", "--role", "write", "--password-file", file, "--data", data}); err != nil {
		t.Fatal(err)
	}
	u, err = pgauth.LoadUser(data, "bob")
	if err != nil || u.Role != pgauth.RoleWrite || pgauth.VerifierFromSalt("s3cret", u.Verifier.Salt, u.Verifier.Iterations).String() != u.Verifier.String() {
		t.Fatal(u, err)
	}
	if _, err := os.Stat(pgauth.PasswordFile(data, "bob")); !os.IsNotExist(err) {
		t.Fatal("a given password was written out", err)
	}
	for _, args := range [][]string{{"../x", "--data", data}, {"carol", "--role", "admin", "--data", data}, {"--data", data}} {
		if err := runAuthPgUser(context.Background(), args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
