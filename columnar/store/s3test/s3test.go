// Package s3test runs an S3 server for tests in the test's own process
// (gofakes3 with its in-memory backend) behind a real HTTP listener, so the
// code under test goes through the AWS SDK, HTTP and the S3 protocol as it
// would against a bucket elsewhere.
package s3test

import (
	"fmt"
	"net/http/httptest"
	"testing"

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
}

// Start starts a server with bucket, closed when the test ends, and sets
// the AWS environment variables of Env for this process.
func Start(t testing.TB, bucket string) *Server {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	faker := gofakes3.New(backend)
	hs := httptest.NewServer(faker.Server())
	t.Cleanup(hs.Close)
	s := &Server{
		URL:      fmt.Sprintf("s3://%s?endpoint=%s&region=us-east-1", bucket, hs.URL),
		Endpoint: hs.URL,
		Env: []string{
			"AWS_ACCESS_KEY_ID=strata-test",
			"AWS_SECRET_ACCESS_KEY=strata-test-secret",
			"AWS_REGION=us-east-1",
			"AWS_CONFIG_FILE=/dev/null",
			"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
			"AWS_EC2_METADATA_DISABLED=true",
		},
	}
	for _, kv := range s.Env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				t.Setenv(kv[:i], kv[i+1:])
				break
			}
		}
	}
	return s
}
