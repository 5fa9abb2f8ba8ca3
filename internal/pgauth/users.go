package pgauth

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-db/strata/internal/fsutil"
)

// DirName is the directory of the data directory that holds the users.
const DirName = "pg-auth"

// DefaultUser is the user made at the first start.
const DefaultUser = "strata"

// Roles of a user: read runs queries; write may also change keyed tables
// (INSERT, UPDATE and DELETE by key, sent as change events).
const (
	RoleRead  = "read"
	RoleWrite = "write"
)

// ErrNoUser is returned by LoadUser for a user that does not exist.
var ErrNoUser = errors.New("pgauth: no such user")

// User is one user of the front door.
type User struct {
	Name     string
	Role     string
	Verifier Verifier
}

// Dir returns DATA/pg-auth.
func Dir(dataDir string) string { return filepath.Join(dataDir, DirName) }

// PasswordFile returns DATA/pg-auth/NAME.password.
func PasswordFile(dataDir, name string) string {
	return filepath.Join(Dir(dataDir), name+".password")
}

func userFile(dataDir, name string) string { return filepath.Join(Dir(dataDir), name+".user") }

// ValidName checks a user name: 1 to 63 letters, digits, '_', '-' or
// '.', not starting with '.'.
func ValidName(name string) error {
	if name == "" || len(name) > 63 || name[0] == '.' {
		return fmt.Errorf("pgauth: invalid user name %q", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("pgauth: invalid user name %q", name)
		}
	}
	return nil
}

// LoadUser reads a user; ErrNoUser when there is none.
func LoadUser(dataDir, name string) (*User, error) {
	if ValidName(name) != nil {
		return nil, ErrNoUser
	}
	data, err := os.ReadFile(userFile(dataDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoUser
	}
	if err != nil {
		return nil, err
	}
	u := &User{Name: name}
	var verifier string
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "role":
			u.Role = v
		case "verifier":
			verifier = v
		}
	}
	if u.Role != RoleRead && u.Role != RoleWrite {
		return nil, fmt.Errorf("pgauth: user %s: role %q is not read or write", name, u.Role)
	}
	if u.Verifier, err = ParseVerifier(verifier); err != nil {
		return nil, fmt.Errorf("pgauth: user %s: %w", name, err)
	}
	return u, nil
}

// ensureDir makes DATA/pg-auth with mode 0700, tightening a looser one.
func ensureDir(dataDir string) error {
	dir := Dir(dataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pgauth: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("pgauth: %w", err)
	}
	return nil
}

// SetUser writes the user NAME with role and the verifier of password
// (made anew: a new salt), replacing any user of that name.
func SetUser(dataDir, name, role, password string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if role != RoleRead && role != RoleWrite {
		return fmt.Errorf("pgauth: role %q is not read or write", role)
	}
	if password == "" {
		return errors.New("pgauth: empty password")
	}
	if err := ensureDir(dataDir); err != nil {
		return err
	}
	v, err := NewVerifier(password, DefaultIterations)
	if err != nil {
		return err
	}
	return fsutil.WriteFile(userFile(dataDir, name), fmt.Appendf(nil, "role=%s\nverifier=%s\n", role, v))
}

// NewPassword returns a random password (24 bytes, URL-safe base64).
func NewPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// WritePassword writes password to DATA/pg-auth/NAME.password (0600).
func WritePassword(dataDir, name, password string) error {
	if err := ensureDir(dataDir); err != nil {
		return err
	}
	return fsutil.WriteFile(PasswordFile(dataDir, name), []byte(password+"\n"))
}

// EnsureDefault makes the user strata (role write) with a random
// password written to DATA/pg-auth/strata.password, unless the user
// exists. It reports whether it made it.
func EnsureDefault(dataDir string) (bool, error) {
	if err := ensureDir(dataDir); err != nil {
		return false, err
	}
	if _, err := os.Stat(userFile(dataDir, DefaultUser)); err == nil {
		return false, nil
	}
	pw, err := NewPassword()
	if err != nil {
		return false, err
	}
	// The password file first: a crash between the two leaves a password
	// and no user, and the next start makes both again.
	if err := WritePassword(dataDir, DefaultUser, pw); err != nil {
		return false, err
	}
	if err := SetUser(dataDir, DefaultUser, RoleWrite, pw); err != nil {
		return false, err
	}
	return true, nil
}
