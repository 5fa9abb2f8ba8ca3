package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{
		name:    "jobs record",
		summary: "save the JOBS stream to a file (for replay into another deployment)",
		run:     runJobsRecord,
	})
	register(command{
		name:    "jobs replay",
		summary: "publish a recorded job stream into a deployment",
		run:     runJobsReplay,
	})
}

// natsFlags are the connection flags of every command that talks to NATS
// (service.Common.RegisterConn): where the servers are, the credentials,
// and the data directory their password files are found in.
type natsFlags struct{ common service.Common }

func (f *natsFlags) register(fs *flag.FlagSet) { f.common.RegisterConn(fs, "strata") }

// connect opens a connection, as cli-admin when the password is found in
// the data directory (see service.Common.ConnOptions).
func (f *natsFlags) connect(ctx context.Context, mods ...func(*natsutil.ConnOptions)) (*nats.Conn, jetstream.JetStream, error) {
	if service.FlagInArgs(os.Args[1:], "nats-password") {
		fmt.Fprintln(os.Stderr, "strata: warning:", service.PasswordFlagWarning)
	}
	opts, err := f.common.ConnOptions()
	if err != nil {
		return nil, nil, err
	}
	opts.Name = "strata-cli"
	for _, m := range mods {
		m(&opts)
	}
	return service.ConnectJetStream(opts)
}

// connectCreating is connect that also creates the streams if they do not
// exist (a fresh deployment that a replay feeds); their configuration is
// the services'.
func (f *natsFlags) connectCreating(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	nc, js, err := f.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := f.common.Topology().CreateMissingStreams(ctx, js); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

func runJobsRecord(ctx context.Context, args []string) error {
	var nf natsFlags
	cmd := newCmdLine("jobs record", "usage: strata jobs record FILE [flags]\n\nSaves every job stored in the JOBS stream, oldest first, to FILE.")
	nf.register(cmd.fs)
	path, err := cmd.parseFile(args)
	if err != nil {
		return err
	}
	nc, js, err := nf.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	n, err := natsutil.RecordStream(ctx, js, messages.StreamJobs, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "recorded %d jobs to %s\n", n, path)
	return nil
}

func runJobsReplay(ctx context.Context, args []string) error {
	var nf natsFlags
	cmd := newCmdLine("jobs replay", "usage: strata jobs replay FILE [flags]\n\nPublishes a recording made by `strata jobs record` into this deployment, in order,\nwith the original message IDs (a second replay publishes nothing new).")
	nf.register(cmd.fs)
	nf.common.RegisterTopology(cmd.fs) // the streams it creates when missing
	rate := cmd.fs.Float64("rate", 0, "jobs per second (0: as fast as the server takes them)")
	path, err := cmd.parseFile(args)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	msgs, err := natsutil.ReadRecording(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	nc, js, err := nf.connectCreating(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	var tick <-chan time.Time
	if *rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer t.Stop()
		tick = t.C
	}
	for i := range msgs {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := natsutil.Replay(ctx, js, msgs[i:i+1], nil); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "\rreplayed %d/%d", i+1, len(msgs))
	}
	fmt.Fprintln(os.Stderr)
	return nil
}
