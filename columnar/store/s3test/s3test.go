// Package s3test runs an S3 server for tests in the test's own process
// (gofakes3 with its in-memory backend) behind a real HTTP listener, so the
// code under test goes through the AWS SDK, HTTP and the S3 protocol as it
// would against a bucket elsewhere. The server can hold PUTs of chosen
// keys (HoldPuts), for tests of a writer killed mid-upload.
//
// With STRATA_TEST_S3_URL set to the store URL of a bucket on a real S3
// server (a SeaweedFS from `make local S3=1`, a MinIO, AWS itself), every
// test uses that bucket instead, each under a key prefix of its own, with
// the AWS credentials of the environment; tests that need HoldPuts are
// skipped:
//
//	STRATA_TEST_S3_URL='s3://strata?endpoint=http://127.0.0.1:4224&region=us-east-1' \
//	AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... go test ./columnar/... ./integration/
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/strata-db/strata/columnar/store"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is an S3 server with one bucket.
type Server struct {
	// URL is the store URL of the bucket: s3://BUCKET?endpoint=...&region=....
	URL string
	// Endpoint is the server's HTTP address.
	Endpoint string
	// Env holds the AWS environment variables a child process needs to
	// reach the server (credentials the server accepts, and no shared
	// files of the user running the test).
	Env []string

	t        testing.TB
	bucket   string
	external bool // a server of STRATA_TEST_S3_URL, not ours
	mu       sync.Mutex
	hold     *hold // nil: every request is served
}

// ExternalEnv names the variable that points the tests at a real server.
const ExternalEnv = "STRATA_TEST_S3_URL"

// hold is one HoldPuts.
type hold struct {
	pattern  string
	held     chan string
	released chan struct{}
	once     sync.Once
}

// Start starts a server with bucket, closed when the test ends, and sets
// the AWS environment variables of Env for this process.
func Start(t testing.TB, bucket string) *Server {
	t.Helper()
	if u := os.Getenv(ExternalEnv); u != "" {
		return external(t, u)
	}
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	faker := gofakes3.New(backend)
	s := &Server{t: t, bucket: bucket}
	hs := httptest.NewServer(s.holding(faker.Server()))
	t.Cleanup(hs.Close)
	t.Cleanup(s.release) // before the close, which waits for held requests
	s.URL = fmt.Sprintf("s3://%s?endpoint=%s&region=us-east-1", bucket, hs.URL)
	s.Endpoint = hs.URL
	s.Env = []string{
		"AWS_ACCESS_KEY_ID=strata-test",
		"AWS_SECRET_ACCESS_KEY=strata-test-secret",
		"AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
	}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return s
}

// Store opens the store of the server's bucket (URL), closed when the
// test ends.
func (s *Server) Store(t testing.TB) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), s.URL)
	if err != nil {
		t.Fatalf("s3test: open %s: %v", s.URL, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// HoldPuts makes the server hold, from now on, every PUT of an object
// whose key (relative to the bucket) matches pattern (path.Match): the
// request is neither read nor answered, and its key is sent on held
// (buffered; keys past its capacity are not sent). release ends the hold:
// the held PUTs are answered 503 Service Unavailable without being
// stored, as by a server that lost them, and later ones (a live client's
// retry) are served. release may be called more than
// once; it is called when the test ends. One hold at a time: a second
// HoldPuts releases the first.
func (s *Server) HoldPuts(pattern string) (held <-chan string, release func()) {
	s.t.Helper()
	if s.external {
		s.t.Skipf("s3test: HoldPuts needs the test's own server, not %s", ExternalEnv)
	}
	if _, err := path.Match(pattern, ""); err != nil {
		s.t.Fatalf("s3test: HoldPuts pattern %q: %v", pattern, err)
	}
	h := &hold{pattern: pattern, held: make(chan string, 16), released: make(chan struct{})}
	s.mu.Lock()
	old := s.hold
	s.hold = h
	s.mu.Unlock()
	if old != nil {
		old.end()
	}
	return h.held, func() {
		s.mu.Lock()
		if s.hold == h {
			s.hold = nil
		}
		s.mu.Unlock()
		h.end()
	}
}

func (h *hold) end() { h.once.Do(func() { close(h.released) }) }

// release ends any hold.
func (s *Server) release() {
	s.mu.Lock()
	h := s.hold
	s.hold = nil
	s.mu.Unlock()
	if h != nil {
		h.end()
	}
}

// holding wraps the S3 handler with the hold of HoldPuts.
func (s *Server) holding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			key, ok := strings.CutPrefix(r.URL.Path, "/"+s.bucket+"/")
			s.mu.Lock()
			h := s.hold
			s.mu.Unlock()
			if ok && h != nil {
				if m, _ := path.Match(h.pattern, key); m {
					select {
					case h.held <- key:
					default:
					}
					select {
					case <-h.released:
					case <-r.Context().Done():
					}
					http.Error(w, "held by the test, then dropped", http.StatusServiceUnavailable)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// external is Start for the server of STRATA_TEST_S3_URL: its bucket,
// under a prefix of this test's own (s3://BUCKET/PREFIX/strata-test-<random>).
func external(t testing.TB, rawURL string) *Server {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		t.Fatalf("s3test: %s=%q: want s3://BUCKET[/PREFIX]?endpoint=...", ExternalEnv, rawURL)
	}
	var b [6]byte
	rand.Read(b[:])
	u.Path = path.Join("/", u.Path, "strata-test-"+hex.EncodeToString(b[:]))
	s := &Server{t: t, bucket: u.Host, external: true, URL: u.String(), Endpoint: u.Query().Get("endpoint")}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		if v, ok := os.LookupEnv(k); ok {
			s.Env = append(s.Env, k+"="+v)
		}
	}
	return s
}
