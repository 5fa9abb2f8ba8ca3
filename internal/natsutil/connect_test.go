package natsutil_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
)

func TestConnectWithUserAndPassword(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: natsembed.RandomPort, Username: "strata", Password: "s3cret", NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()

	nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{url}, User: "strata", Password: "s3cret", Name: "auth-test"})
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	nc.Close()
	if _, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{url}, User: "strata", Password: "wrong"}); err == nil {
		t.Error("wrong password accepted")
	}
	// Any reachable URL of a list will do.
	nc, err = natsutil.Connect(natsutil.ConnOptions{URLs: []string{"nats://127.0.0.1:1", url}, User: "strata", Password: "s3cret"})
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
