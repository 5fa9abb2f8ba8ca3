package service

import (
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsutil"
)

// ConnectNATS connects as the flags describe, adds a "nats" health check to
// r, and returns the connection and its JetStream context. The caller
// drains the connection on stop.
func (c *Common) ConnectNATS(log *slog.Logger, r *Runner) (*nats.Conn, jetstream.JetStream, error) {
	opts, err := c.ConnOptions()
	if err != nil {
		return nil, nil, err
	}
	opts.Logger = log
	opts.RetryOnFailedConnect = true
	nc, js, err := ConnectJetStream(opts)
	if err != nil {
		return nil, nil, err
	}
	if r != nil {
		r.AddCheck("nats", func() error {
			if !nc.IsConnected() {
				return errors.New("not connected: " + nc.Status().String())
			}
			return nil
		})
	}
	return nc, js, nil
}

// ConnectJetStream connects with opts and returns the connection and its
// JetStream context; the caller closes the connection.
func ConnectJetStream(opts natsutil.ConnOptions) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := natsutil.Connect(opts)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}
