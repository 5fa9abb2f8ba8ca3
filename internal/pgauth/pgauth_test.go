package pgauth

import (
	"errors"
	"os"
	"testing"
)

// RFC 7677, section 3: user "user", password "pencil".
func TestSCRAMRFC7677Vector(t *testing.T) {
	salt, _ := b64.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	v := VerifierFromSalt("pencil", salt, 4096)
	s, err := NewSession(v, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.First([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(first) != want {
		t.Fatalf("server-first %q, want %q", first, want)
	}
	final, err := s.Final([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(final) != want {
		t.Fatalf("server-final %q, want %q", final, want)
	}
	// The same exchange with another password fails at the proof.
	s2, _ := NewSession(VerifierFromSalt("pencil2", salt, 4096), "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
	if _, err := s2.First([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO")); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Final([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestSCRAMMalformed(t *testing.T) {
	v := VerifierFromSalt("x", []byte("salt"), 1)
	for _, first := range []string{"", "n", "n,", "p=tls-server-end-point,,n=,r=abc", "q,,n=,r=abc", "n,,n=,m=ext,r=abc", "n,,n=", "n,,n=,r=a b"} {
		s, _ := NewSession(v, "srv")
		if _, err := s.First([]byte(first)); !errors.Is(err, ErrAuth) {
			t.Errorf("client-first %q: %v", first, err)
		}
	}
	s, _ := NewSession(v, "srv")
	if _, err := s.Final([]byte("c=biws,r=x,p=AAAA")); !errors.Is(err, ErrAuth) {
		t.Errorf("final before first: %v", err)
	}
	s, _ = NewSession(v, "srv")
	if _, err := s.First([]byte("n,,n=,r=abc")); err != nil {
		t.Fatal(err)
	}
	for _, final := range []string{"", "c=biws,r=abcsrv", "c=eSws,r=abcsrv,p=" + b64.EncodeToString(make([]byte, 32)), "c=biws,r=abcXXX,p=" + b64.EncodeToString(make([]byte, 32)), "c=biws,r=abcsrv,p=!!"} {
		s2 := *s
		if _, err := s2.Final([]byte(final)); !errors.Is(err, ErrAuth) {
			t.Errorf("client-final %q: %v", final, err)
		}
	}
}

func TestVerifierRoundTrip(t *testing.T) {
	v, err := NewVerifier("secret", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseVerifier(v.String())
	if err != nil || got.String() != v.String() {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "md5abc", "SCRAM-SHA-256$x:AA==$AA==:AA==", "SCRAM-SHA-256$4096:AA==$AA==:AA=="} {
		if _, err := ParseVerifier(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestUsers(t *testing.T) {
	data := t.TempDir()
	made, err := EnsureDefault(data)
	if err != nil || !made {
		t.Fatal(made, err)
	}
	if made, err := EnsureDefault(data); err != nil || made {
		t.Fatal("made twice", err)
	}
	for _, p := range []string{PasswordFile(data, DefaultUser), userFile(data, DefaultUser)} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
	}
	if fi, _ := os.Stat(Dir(data)); fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", fi.Mode())
	}
	pw, _ := os.ReadFile(PasswordFile(data, DefaultUser))
	u, err := LoadUser(data, DefaultUser)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := os.ReadFile(userFile(data, DefaultUser))
	if len(pw) < 10 || string(stored) == "" || containsBytes(stored, pw[:len(pw)-1]) {
		t.Fatal("the user file holds the password")
	}
	if VerifierFromSalt(string(pw[:len(pw)-1]), u.Verifier.Salt, u.Verifier.Iterations).String() != u.Verifier.String() {
		t.Fatal("verifier does not match the password file")
	}
	if err := SetUser(data, "alice", RoleRead, "pw"); err != nil {
		t.Fatal(err)
	}
	if u, err := LoadUser(data, "alice"); err != nil || u.Role != RoleRead {
		t.Fatal(u, err)
	}
	for _, name := range []string{"bob", "../x", "", ".hidden"} {
		if _, err := LoadUser(data, name); !errors.Is(err, ErrNoUser) {
			t.Errorf("%q: %v", name, err)
		}
	}
	if err := SetUser(data, "x", "admin", "pw"); err == nil {
		t.Error("role admin accepted")
	}
}

func containsBytes(haystack, needle []byte) bool {
	return len(needle) > 0 && string(haystack) != "" && indexOf(string(haystack), string(needle)) >= 0
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
