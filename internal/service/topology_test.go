package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

// TestWorkerCannotReconfigureConsumers is the reproduction of one merger
// started with --job-ack-wait 1ms --job-max-deliver 1 silently changing the
// consumer every merger shares: a binary that does not own the topology
// refuses a flag that disagrees with it, adopts it otherwise, and changes
// nothing on the server.
func TestWorkerCannotReconfigureConsumers(t *testing.T) {
	srv := natstest.Server(t, natsembed.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	owner := NewBinary("scheduler", "")
	owner.OwnsTopology = true
	if err := owner.Start([]string{"--nats", srv.ClientURL(), "--data", t.TempDir(), "--job-ack-wait", "7s", "--job-max-deliver", "4"}); err != nil {
		t.Fatal(err)
	}
	if err := owner.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer owner.NC.Close()

	rogue := NewBinary("merger", "")
	if err := rogue.Start([]string{"--nats", srv.ClientURL(), "--data", t.TempDir(), "--job-ack-wait", "1ms", "--job-max-deliver", "1"}); err != nil {
		t.Fatal(err)
	}
	if err := rogue.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer rogue.NC.Close()
	_, err := rogue.WaitConsumer(ctx, messages.StreamJobs, messages.ConsumerMerger)
	if err == nil || !strings.Contains(err.Error(), "--job-ack-wait 1ms disagrees with consumer merger's 7s") {
		t.Fatalf("a worker with a disagreeing lease connected: %v", err)
	}
	cons, err := owner.JS.Consumer(ctx, messages.StreamJobs, messages.ConsumerMerger)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := cons.CachedInfo().Config; cfg.AckWait != 7*time.Second || cfg.MaxDeliver != 4 {
		t.Fatalf("the shared consumer changed: AckWait %s, MaxDeliver %d", cfg.AckWait, cfg.MaxDeliver)
	}

	plain := NewBinary("merger", "")
	if err := plain.Start([]string{"--nats", srv.ClientURL(), "--data", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if err := plain.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer plain.NC.Close()
	if _, err := plain.WaitConsumer(ctx, messages.StreamJobs, messages.ConsumerMerger); err != nil {
		t.Fatal(err)
	}
	if topo := plain.Topology(); topo.JobAckWait != 7*time.Second || topo.JobMaxDeliver != 4 {
		t.Errorf("the worker did not adopt the deployment's lease: %s, %d deliveries", topo.JobAckWait, topo.JobMaxDeliver)
	}
}

// TestWorkerWaitsForTopology: a worker started before the scheduler waits
// for the streams instead of creating them with its own settings.
func TestWorkerWaitsForTopology(t *testing.T) {
	srv := natstest.Server(t, natsembed.Options{})
	w := NewBinary("windower", "")
	if err := w.Start([]string{"--nats", srv.ClientURL(), "--data", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	connected := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Connect(ctx); err != nil {
			connected <- err
			return
		}
		_, err := w.WaitConsumer(ctx, messages.StreamJobs, messages.ConsumerWindower)
		connected <- err
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-connected:
		t.Fatalf("connected before the topology existed: %v", err)
	default:
	}
	nc, js, err := ConnectJetStream(natsutil.ConnOptions{URLs: []string{srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := js.Stream(context.Background(), messages.StreamJobs); err != jetstream.ErrStreamNotFound {
		t.Fatalf("the worker created stream JOBS: %v", err)
	}
	if err := natsutil.DefaultTopology().Ensure(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	if err := <-connected; err != nil {
		t.Fatal(err)
	}
	w.NC.Close()
}
