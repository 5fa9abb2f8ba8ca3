package natsutil_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
)

// testCA is a certificate authority a test makes.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	path string // its certificate, PEM
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".pem")
	writePEM(t, path, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, path: path}
}

// issue makes a certificate signed by ca for a server (127.0.0.1,
// localhost) or a client, and returns the paths of it and its key.
func (ca *testCA) issue(t *testing.T, dir, name string, server bool) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "EC PRIVATE KEY", kder)
	return certPath, keyPath
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	other := newTestCA(t, dir, "other-ca")
	srvCert, srvKey := ca.issue(t, dir, "server", true)
	cliCert, cliKey := ca.issue(t, dir, "client", false)
	strangerCert, strangerKey := other.issue(t, dir, "stranger", false)

	for _, mutual := range []bool{false, true} {
		name := "server TLS"
		if mutual {
			name = "mutual TLS"
		}
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			passwords, err := natsutil.EnsureCredentials(data)
			if err != nil {
				t.Fatal(err)
			}
			opts := natsembed.Options{DataDir: data, Port: natsembed.RandomPort, Passwords: passwords, TLSCert: srvCert, TLSKey: srvKey}
			if mutual {
				opts.TLSCA = ca.path
			}
			srv := natstest.Server(t, opts)
			base := natsutil.ConnOptions{URLs: []string{srv.ClientURL()}, User: natsutil.RoleMerger, Password: passwords[natsutil.RoleMerger], ConnectTimeout: 2 * time.Second}
			with := func(f func(*natsutil.ConnOptions)) natsutil.ConnOptions { o := base; f(&o); return o }
			cases := []struct {
				name string
				opts natsutil.ConnOptions
				ok   bool
			}{
				{"trusting the CA", with(func(o *natsutil.ConnOptions) { o.TLSCA = ca.path; o.TLSCert, o.TLSKey = cliCert, cliKey }), true},
				{"without trust (system roots)", with(func(o *natsutil.ConnOptions) { o.TLSCert, o.TLSKey = cliCert, cliKey }), false},
				{"trusting another CA", with(func(o *natsutil.ConnOptions) { o.TLSCA = other.path; o.TLSCert, o.TLSKey = cliCert, cliKey }), false},
				{"trusting the CA, no password", with(func(o *natsutil.ConnOptions) {
					o.TLSCA = ca.path
					o.TLSCert, o.TLSKey = cliCert, cliKey
					o.Password = ""
				}), false},
				{"trusting the CA, no client certificate", with(func(o *natsutil.ConnOptions) { o.TLSCA = ca.path }), !mutual},
				{"trusting the CA, a client certificate of another CA", with(func(o *natsutil.ConnOptions) { o.TLSCA = ca.path; o.TLSCert, o.TLSKey = strangerCert, strangerKey }), !mutual},
			}
			for _, c := range cases {
				nc, err := natsutil.Connect(c.opts)
				if err == nil {
					if tls, _ := nc.TLSConnectionState(); !tls.HandshakeComplete {
						t.Errorf("%s: connected without TLS", c.name)
					}
					nc.Close()
				}
				if (err == nil) != c.ok {
					t.Errorf("%s: connect error %v, want success %v", c.name, err, c.ok)
				}
			}
		})
	}

	// With a certificate the embedded server may listen beyond loopback.
	data := t.TempDir()
	passwords, err := natsutil.EnsureCredentials(data)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Server(t, natsembed.Options{DataDir: data, Host: "0.0.0.0", Passwords: passwords, TLSCert: srvCert, TLSKey: srvKey})
	// Its URL is one the certificate names, so this host's clients (the
	// scheduler itself) verify it.
	if !strings.HasPrefix(srv.ClientURL(), "tls://127.0.0.1:") {
		t.Errorf("client URL %s", srv.ClientURL())
	}
	nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{srv.ClientURL()}, User: natsutil.RoleScheduler, Password: passwords[natsutil.RoleScheduler], TLSCA: ca.path})
	if err != nil {
		t.Fatalf("connect to %s: %v", srv.ClientURL(), err)
	}
	nc.Close()
}
