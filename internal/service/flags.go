package service

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/strata-db/strata/internal/natsutil"
)

// EnvPrefix prefixes the environment variable of every flag.
const EnvPrefix = "STRATA_"

// EnvName returns the environment variable that sets flag name:
// "log-format" -> "STRATA_LOG_FORMAT".
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args into fs, after setting every flag not given in args from
// its environment variable (see EnvName). A bad environment value is an
// error that names the variable.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		env := EnvName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment %s=%q: %w", env, v, e)
			}
		}
	})
	return err
}

// Common holds the flags every service binary takes.
type Common struct {
	Name string // service name, for logs, NATS and metrics

	NATS      string // comma-separated server URLs
	Creds     string
	User      string
	Password  string
	TLSCert   string
	TLSKey    string
	TLSCA     string
	DataDir   string
	HTTPAddr  string
	LogFormat string
	LogLevel  string
	Worker    string        // this process's name in job events
	StopGrace time.Duration // how long a stop may take before the process gives up

	// Stream topology: every process that ensures the streams must agree,
	// so these belong in the environment all services share.
	Replicas      int
	JobAckWait    time.Duration
	JobMaxDeliver int
}

// Register adds the common flags to fs. defaultHTTP is the service's
// default listen address for /metrics and /healthz ("" disables it).
func (c *Common) Register(fs *flag.FlagSet, name, defaultHTTP string) {
	c.Name = name
	host, _ := os.Hostname()
	fs.StringVar(&c.NATS, "nats", natsutil.DefaultURL, "NATS server URLs, comma-separated")
	fs.StringVar(&c.Creds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&c.User, "nats-user", "", "NATS user name")
	fs.StringVar(&c.Password, "nats-password", "", "NATS password")
	fs.StringVar(&c.TLSCert, "nats-tls-cert", "", "client TLS certificate (PEM)")
	fs.StringVar(&c.TLSKey, "nats-tls-key", "", "client TLS key (PEM)")
	fs.StringVar(&c.TLSCA, "nats-tls-ca", "", "CA bundle that signs the NATS servers' certificates (PEM)")
	fs.StringVar(&c.DataDir, "data", "data", "data directory (containers, WAL, embedded NATS store)")
	fs.StringVar(&c.HTTPAddr, "http", defaultHTTP, "listen address for /metrics and /healthz (empty: none)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.Worker, "worker", fmt.Sprintf("%s@%s:%d", name, host, os.Getpid()), "this worker's name in job events and logs")
	fs.DurationVar(&c.StopGrace, "stop-grace", 60*time.Second, "how long a graceful stop may take")
	def := natsutil.DefaultTopology()
	fs.IntVar(&c.Replicas, "nats-replicas", def.Replicas, "replicas of strata's streams and buckets (3 on a three-node cluster)")
	fs.DurationVar(&c.JobAckWait, "job-ack-wait", def.JobAckWait, "lease of a job: redelivered if not extended within it")
	fs.IntVar(&c.JobMaxDeliver, "job-max-deliver", def.JobMaxDeliver, "deliveries of a job before it fails for good")
}

// Topology returns the streams, consumers and buckets the flags describe.
// The scheduler ensures it at start; the other services adopt what it
// configured (see Binary.Connect), and refuse to start on a flag that
// disagrees.
func (c *Common) Topology() natsutil.Topology {
	t := natsutil.DefaultTopology()
	t.Replicas = c.Replicas
	t.JobAckWait = c.JobAckWait
	t.JobMaxDeliver = c.JobMaxDeliver
	return t
}

// ConnOptions returns the NATS connection options the flags describe.
func (c *Common) ConnOptions() natsutil.ConnOptions {
	return natsutil.ConnOptions{
		URLs:      natsutil.SplitURLs(c.NATS),
		Name:      c.Worker,
		CredsFile: c.Creds,
		User:      c.User,
		Password:  c.Password,
		TLSCert:   c.TLSCert,
		TLSKey:    c.TLSKey,
		TLSCA:     c.TLSCA,
	}
}
