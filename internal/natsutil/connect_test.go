package natsutil_test

import (
	"testing"
	"time"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
)

func TestConnectWithUserAndPassword(t *testing.T) {
	srv := natstest.Server(t, natsembed.Options{Passwords: map[string]string{natsutil.RoleMerger: "s3cret"}})
	url := srv.ClientURL()

	nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{url}, User: natsutil.RoleMerger, Password: "s3cret", Name: "auth-test"})
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	nc.Close()
	if _, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{url}, User: natsutil.RoleMerger, Password: "wrong"}); err == nil {
		t.Error("wrong password accepted")
	}
	// Any reachable URL of a list will do.
	nc, err = natsutil.Connect(natsutil.ConnOptions{URLs: []string{"nats://127.0.0.1:1", url}, User: natsutil.RoleMerger, Password: "s3cret"})
	if err != nil {
		t.Fatalf("URL list with one dead server: %v", err)
	}
	nc.Close()
}

func TestConnectReportsMissingCredsFile(t *testing.T) {
	_, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{"nats://127.0.0.1:1"}, CredsFile: "/nonexistent/strata.creds", ConnectTimeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatal("missing credentials file accepted")
	}
}
