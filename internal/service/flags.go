package service

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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

// ErrUsage marks an error the user fixes by changing the command line (or
// the environment that stands for it): a bad or missing flag or argument.
// Binaries exit with status 2 on it, and 1 on any other failure.
var ErrUsage = errors.New("usage")

// ErrVersion is what Binary.Start returns after printing the version for
// --version: the binary has done what it was asked and exits 0.
var ErrVersion = errors.New("version printed")

// Parse parses args into fs, after setting every flag not given in args from
// its environment variable (see EnvName). Flags may sit among the
// positional arguments (`strata window 'SELECT ...' --rows 3`); afterwards
// fs.Args() holds the positional ones in order, and "--" ends the flags.
//
// -h or --help prints the usage to stdout (to fs's output if it was set to
// something other than stderr) and returns flag.ErrHelp. A bad flag or a
// bad environment value prints the usage to fs's output and returns an
// ErrUsage error that names the flag or the variable.
func Parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(Interspersed(fs, args))
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		if out == io.Writer(os.Stderr) {
			out = os.Stdout
		}
		out.Write(buf.Bytes())
		return flag.ErrHelp
	}
	if err != nil {
		out.Write(buf.Bytes())
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		env := EnvName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%w: environment %s=%q: %v", ErrUsage, env, v, e)
			}
		}
	})
	return err
}

// Interspersed reorders args so that the flags of fs come first and the
// positional arguments after a "--", keeping the order of each: the flag
// package stops at the first positional argument, and a command line
// reads better with the flags anywhere (`strata jobs record FILE --nats
// URL`). A flag that takes a value takes the next argument unless given
// as --name=value; an argument that is "-" or does not start with "-" is
// positional, and so is everything after "--".
func Interspersed(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if len(pos) == 0 {
		return flags
	}
	return append(append(flags, "--"), pos...)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Common holds the flags every service binary takes.
type Common struct {
	Name string // service name, for logs, NATS and metrics
	// Role is the NATS role this binary authenticates as when it finds its
	// password in the data directory (natsutil.Role*); Register sets it.
	Role string

	NATS         string // comma-separated server URLs
	Creds        string
	User         string
	Password     string // a flag for compatibility: prefer PasswordFile or STRATA_NATS_PASSWORD
	PasswordFile string
	TLSCert      string
	TLSKey       string
	TLSCA        string
	DataDir      string
	HTTPAddr     string
	LogFormat    string
	LogLevel     string
	Worker       string        // this process's name in job events
	StopGrace    time.Duration // how long a stop may take before the process gives up
	ShowVersion  bool          // --version: print Version and exit

	// Stream topology: every process that ensures the streams must agree,
	// so these belong in the environment all services share.
	Replicas      int
	JobAckWait    time.Duration
	JobMaxDeliver int
}

// Register adds the common flags of a service binary to fs: the
// connection flags (RegisterConn), the service flags (--http, --log-*,
// --worker, --stop-grace, --version) and the topology flags
// (RegisterTopology). defaultHTTP is the service's default listen address
// for /metrics and /healthz ("" disables it).
func (c *Common) Register(fs *flag.FlagSet, name, defaultHTTP string) {
	c.RegisterConn(fs, name)
	host, _ := os.Hostname()
	fs.StringVar(&c.HTTPAddr, "http", defaultHTTP, "listen address for /metrics and /healthz (empty: none)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.Worker, "worker", fmt.Sprintf("%s@%s:%d", name, host, os.Getpid()), "this worker's name in job events and logs")
	fs.DurationVar(&c.StopGrace, "stop-grace", 60*time.Second, "how long a graceful stop may take")
	fs.BoolVar(&c.ShowVersion, "version", false, "print the version, VCS commit and Go version, and exit")
	c.RegisterTopology(fs)
}

// RegisterConn adds the flags that say how to reach NATS (--nats,
// --nats-creds, --nats-user, --nats-password*, --nats-tls-*) and --data,
// where the role's password file is found, to fs: all a client such as
// the strata CLI takes. The topology fields get their defaults.
func (c *Common) RegisterConn(fs *flag.FlagSet, name string) {
	c.Name = name
	c.Role = RoleOf(name)
	def := natsutil.DefaultTopology()
	c.Replicas, c.JobAckWait, c.JobMaxDeliver = def.Replicas, def.JobAckWait, def.JobMaxDeliver
	fs.StringVar(&c.NATS, "nats", natsutil.DefaultURL, "NATS server URLs, comma-separated")
	fs.StringVar(&c.Creds, "nats-creds", "", "NATS credentials file (JWT and nkey seed)")
	fs.StringVar(&c.User, "nats-user", "", "NATS user name (default: the role, "+c.Role+", when a password is given)")
	fs.StringVar(&c.Password, "nats-password", "", "NATS password; visible to other users in ps: use --nats-password-file or STRATA_NATS_PASSWORD")
	fs.StringVar(&c.PasswordFile, "nats-password-file", "", "file holding the NATS password (default: DATA/nats-auth/"+c.Role+".password when it exists)")
	fs.StringVar(&c.TLSCert, "nats-tls-cert", "", "client TLS certificate (PEM)")
	fs.StringVar(&c.TLSKey, "nats-tls-key", "", "client TLS key (PEM)")
	fs.StringVar(&c.TLSCA, "nats-tls-ca", "", "CA bundle that signs the NATS servers' certificates (PEM)")
	fs.StringVar(&c.DataDir, "data", "data", "data directory (containers, WAL, embedded NATS store)")
}

// RegisterTopology adds the stream topology flags (--nats-replicas,
// --job-ack-wait, --job-max-deliver) to fs.
func (c *Common) RegisterTopology(fs *flag.FlagSet) {
	def := natsutil.DefaultTopology()
	fs.IntVar(&c.Replicas, "nats-replicas", def.Replicas, "replicas of strata's streams and buckets (3 on a three-node cluster)")
	fs.DurationVar(&c.JobAckWait, "job-ack-wait", def.JobAckWait, "lease of a job: redelivered if not extended within it")
	fs.IntVar(&c.JobMaxDeliver, "job-max-deliver", def.JobMaxDeliver, "deliveries of a job before it fails for good")
}

// Topology returns the streams, consumers and buckets the flags describe.
// The scheduler ensures it at start; a worker adopts its consumer's lease
// and delivery settings and refuses to start on a flag that disagrees
// (see Binary.WaitConsumer).
func (c *Common) Topology() natsutil.Topology {
	t := natsutil.DefaultTopology()
	t.Replicas = c.Replicas
	t.JobAckWait = c.JobAckWait
	t.JobMaxDeliver = c.JobMaxDeliver
	return t
}

// RoleOf returns the NATS role of the binary called name: the strata CLI
// is cli-admin, a service its own role.
func RoleOf(name string) string {
	if name == "strata" {
		return natsutil.RoleCLIAdmin
	}
	return name
}

// ConnOptions returns the NATS connection options the flags describe.
//
// Credentials, first found first: --nats-creds; --nats-user with the
// password of --nats-password-file, STRATA_NATS_PASSWORD or
// --nats-password; and, given none of these, the role's password file in
// the data directory (DATA/nats-auth/ROLE.password, which the scheduler's
// embedded server makes), as user ROLE. With none of them the connection
// is unauthenticated.
func (c *Common) ConnOptions() (natsutil.ConnOptions, error) {
	user, password := c.User, c.Password
	if c.PasswordFile != "" {
		pw, err := natsutil.ReadPasswordFile(c.PasswordFile)
		if err != nil {
			return natsutil.ConnOptions{}, fmt.Errorf("--nats-password-file: %w", err)
		}
		password = pw
	}
	if c.Creds == "" && user == "" && password == "" && c.Role != "" && c.DataDir != "" {
		path := natsutil.PasswordFile(c.DataDir, c.Role)
		pw, err := natsutil.ReadPasswordFile(path)
		switch {
		case err == nil:
			user, password = c.Role, pw
		case errors.Is(err, fs.ErrNotExist):
		default:
			return natsutil.ConnOptions{}, fmt.Errorf("NATS credentials: %w", err)
		}
	}
	if user == "" && password != "" && c.Creds == "" {
		user = c.Role
	}
	inboxUser := user
	if inboxUser == "" {
		inboxUser = c.Role
	}
	return natsutil.ConnOptions{
		URLs:        natsutil.SplitURLs(c.NATS),
		Name:        c.Worker,
		CredsFile:   c.Creds,
		User:        user,
		Password:    password,
		TLSCert:     c.TLSCert,
		TLSKey:      c.TLSKey,
		TLSCA:       c.TLSCA,
		InboxPrefix: natsutil.InboxPrefix(inboxUser),
	}, nil
}

// FlagInArgs reports whether flag name was given in args (as -name,
// --name, -name=v or --name=v, before any "--").
func FlagInArgs(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// PasswordFlagWarning is the warning for a password given on the command
// line.
const PasswordFlagWarning = "--nats-password on the command line is visible to every user of this machine (ps, /proc); use --nats-password-file or STRATA_NATS_PASSWORD"
