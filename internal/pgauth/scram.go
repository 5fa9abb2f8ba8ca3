// Package pgauth is the authentication of strata's PostgreSQL front door
// (services/pgwire): the server side of SCRAM-SHA-256 (RFC 5802, RFC
// 7677) and the users it checks, kept in DATA/pg-auth as salted
// verifiers, never as passwords.
//
// # Format
//
// DATA/pg-auth (mode 0700) holds one file per user, NAME.user (mode
// 0600), of lines "key=value": role (read or write) and verifier, in
// PostgreSQL's own form:
//
//	SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
//
// (base64). The user strata made at the first start has its password in
// DATA/pg-auth/strata.password (0600) for the operator to read; the
// server never reads password files.
package pgauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/pbkdf2"
)

// Mechanism is the SASL mechanism name the server offers.
const Mechanism = "SCRAM-SHA-256"

// DefaultIterations is the PBKDF2 iteration count of new verifiers
// (PostgreSQL's scram_iterations default).
const DefaultIterations = 4096

// ErrAuth is wrapped by every failed exchange: a bad message or a wrong
// proof. The caller answers 28P01 whatever the cause.
var ErrAuth = errors.New("pgauth: authentication failed")

// Verifier is what the server keeps of a password.
type Verifier struct {
	Iterations           int
	Salt                 []byte
	StoredKey, ServerKey []byte
}

// NewVerifier makes the verifier of password with a new random 16-byte salt.
func NewVerifier(password string, iterations int) (Verifier, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return Verifier{}, err
	}
	return VerifierFromSalt(password, salt, iterations), nil
}

// VerifierFromSalt derives the verifier of password with the given salt.
func VerifierFromSalt(password string, salt []byte, iterations int) Verifier {
	salted := pbkdf2.Key([]byte(password), salt, iterations, sha256.Size, sha256.New)
	clientKey := hmacSum(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return Verifier{Iterations: iterations, Salt: salt, StoredKey: stored[:], ServerKey: hmacSum(salted, "Server Key")}
}

func hmacSum(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

var b64 = base64.StdEncoding

// String is PostgreSQL's form of the verifier.
func (v Verifier) String() string {
	return fmt.Sprintf("%s$%d:%s$%s:%s", Mechanism, v.Iterations, b64.EncodeToString(v.Salt), b64.EncodeToString(v.StoredKey), b64.EncodeToString(v.ServerKey))
}

// ParseVerifier reads PostgreSQL's form of a verifier.
func ParseVerifier(s string) (Verifier, error) {
	rest, ok := strings.CutPrefix(s, Mechanism+"$")
	if !ok {
		return Verifier{}, errors.New("pgauth: verifier is not SCRAM-SHA-256")
	}
	params, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return Verifier{}, errors.New("pgauth: malformed verifier")
	}
	it, salt, ok1 := strings.Cut(params, ":")
	stored, server, ok2 := strings.Cut(keys, ":")
	if !ok1 || !ok2 {
		return Verifier{}, errors.New("pgauth: malformed verifier")
	}
	var v Verifier
	var err error
	if v.Iterations, err = strconv.Atoi(it); err != nil || v.Iterations < 1 {
		return Verifier{}, errors.New("pgauth: malformed verifier iterations")
	}
	if v.Salt, err = b64.DecodeString(salt); err != nil || len(v.Salt) == 0 {
		return Verifier{}, errors.New("pgauth: malformed verifier salt")
	}
	if v.StoredKey, err = b64.DecodeString(stored); err != nil || len(v.StoredKey) != sha256.Size {
		return Verifier{}, errors.New("pgauth: malformed verifier stored key")
	}
	if v.ServerKey, err = b64.DecodeString(server); err != nil || len(v.ServerKey) != sha256.Size {
		return Verifier{}, errors.New("pgauth: malformed verifier server key")
	}
	return v, nil
}

// MockVerifier is the verifier of a user that does not exist: a salt
// that depends only on the name and secret (so asking twice shows the
// same salt, as for a real user) and keys no password matches. The
// exchange then fails at the proof, as for a wrong password.
func MockVerifier(user string, secret []byte) Verifier {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("mock salt\x00" + user))
	sum := m.Sum(nil)
	keys := make([]byte, 64)
	_, _ = rand.Read(keys)
	return Verifier{Iterations: DefaultIterations, Salt: sum[:16], StoredKey: keys[:32], ServerKey: keys[32:]}
}

// Session is the server side of one SCRAM-SHA-256 exchange.
type Session struct {
	v                  Verifier
	serverNonce        string
	gs2Header          string
	clientFirstBare    string
	serverFirst, nonce string
	step               int
}

// NewSession starts an exchange against v. serverNonce is the server's
// part of the nonce; "" makes a random one (tests pass a fixed one).
func NewSession(v Verifier, serverNonce string) (*Session, error) {
	if serverNonce == "" {
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		serverNonce = b64.EncodeToString(b)
	}
	return &Session{v: v, serverNonce: serverNonce}, nil
}

func authErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrAuth}, a...)...)
}

// First takes the client-first-message and returns the server-first-message.
func (s *Session) First(clientFirst []byte) ([]byte, error) {
	if s.step != 0 {
		return nil, authErr("unexpected client-first-message")
	}
	s.step = 1
	msg := string(clientFirst)
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, authErr("malformed client-first-message")
	}
	switch {
	case flag == "n", flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, authErr("channel binding is not supported")
	default:
		return nil, authErr("malformed client-first-message")
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok || (authzid != "" && !strings.HasPrefix(authzid, "a=")) {
		return nil, authErr("malformed client-first-message")
	}
	s.gs2Header = flag + "," + authzid + ","
	s.clientFirstBare = bare
	var clientNonce string
	for _, attr := range strings.Split(bare, ",") {
		if strings.HasPrefix(attr, "m=") {
			return nil, authErr("mandatory extension not supported")
		}
		if v, ok := strings.CutPrefix(attr, "r="); ok {
			clientNonce = v
		}
	}
	if clientNonce == "" || !printable(clientNonce) {
		return nil, authErr("client nonce missing or invalid")
	}
	s.nonce = clientNonce + s.serverNonce
	s.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, b64.EncodeToString(s.v.Salt), s.v.Iterations)
	return []byte(s.serverFirst), nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// Final takes the client-final-message and returns the
// server-final-message when the proof is right, or an error wrapping
// ErrAuth.
func (s *Session) Final(clientFinal []byte) ([]byte, error) {
	if s.step != 1 {
		return nil, authErr("unexpected client-final-message")
	}
	s.step = 2
	msg := string(clientFinal)
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, authErr("client proof missing")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	var channel, nonce string
	for _, attr := range strings.Split(withoutProof, ",") {
		switch {
		case strings.HasPrefix(attr, "c="):
			channel = attr[2:]
		case strings.HasPrefix(attr, "r="):
			nonce = attr[2:]
		}
	}
	if channel != b64.EncodeToString([]byte(s.gs2Header)) {
		return nil, authErr("channel binding does not match")
	}
	if nonce != s.nonce {
		return nil, authErr("nonce does not match")
	}
	proof, err := b64.DecodeString(proofB64)
	if err != nil || len(proof) != sha256.Size {
		return nil, authErr("malformed client proof")
	}
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	sig := hmacSum(s.v.StoredKey, authMessage)
	clientKey := make([]byte, sha256.Size)
	for i := range clientKey {
		clientKey[i] = proof[i] ^ sig[i]
	}
	stored := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(stored[:], s.v.StoredKey) != 1 {
		return nil, authErr("wrong password")
	}
	return []byte("v=" + b64.EncodeToString(hmacSum(s.v.ServerKey, authMessage))), nil
}
