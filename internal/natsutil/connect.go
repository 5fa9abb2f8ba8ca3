package natsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultURL is the server clients connect to when given none.
const DefaultURL = "nats://127.0.0.1:4222"

// ConnOptions configures a client connection.
type ConnOptions struct {
	// URLs of the servers (any member of a cluster will do); default DefaultURL.
	URLs []string
	// Name identifies the client in server monitoring, e.g. "merger@host".
	Name string
	// CredsFile is a NATS credentials file (JWT + nkey seed).
	CredsFile string
	// User and Password authenticate with a user name and password.
	User, Password string
	// TLSCert and TLSKey are a client certificate and its key (mutual TLS);
	// TLSCA is the CA bundle that signs the servers' certificates.
	TLSCert, TLSKey, TLSCA string
	// InboxPrefix is the prefix of the connection's reply subjects
	// (default "_INBOX"); see InboxPrefix for the one each role may use.
	InboxPrefix string
	// ConnectTimeout bounds each connection attempt; default 5s.
	ConnectTimeout time.Duration
	// RetryOnFailedConnect keeps retrying the first connection in the
	// background instead of failing when no server is up yet.
	RetryOnFailedConnect bool
	// Logger receives disconnect, reconnect and async error reports.
	Logger *slog.Logger
	// AsyncError, when set, is called with every asynchronous error the
	// server reports, such as a permissions violation.
	AsyncError func(error)
}

// SplitURLs splits a comma-separated list of server URLs, dropping blanks.
func SplitURLs(s string) []string {
	var urls []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// Connect opens a connection that reconnects forever; the caller drains or
// closes it.
func Connect(opts ConnOptions) (*nats.Conn, error) {
	urls := opts.URLs
	if len(urls) == 0 {
		urls = []string{DefaultURL}
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nopts := []nats.Option{
		nats.Name(opts.Name),
		nats.Timeout(opts.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
		}),
		nats.ConnectHandler(func(c *nats.Conn) { // the first connection, when it was retried
			log.Info("nats connected", "url", c.ConnectedUrlRedacted())
		}),
		nats.ReconnectErrHandler(refusals(log)),
		nats.ClosedHandler(func(c *nats.Conn) {
			if err := c.LastError(); err != nil {
				log.Warn("nats connection closed", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats async error", "subject", subject, "err", err)
			if opts.AsyncError != nil {
				opts.AsyncError(err)
			}
		}),
	}
	if opts.RetryOnFailedConnect {
		nopts = append(nopts, nats.RetryOnFailedConnect(true))
	}
	if opts.InboxPrefix != "" && opts.InboxPrefix != "_INBOX" {
		nopts = append(nopts, nats.CustomInboxPrefix(opts.InboxPrefix))
	}
	if opts.CredsFile != "" {
		nopts = append(nopts, nats.UserCredentials(opts.CredsFile))
	}
	if opts.User != "" || opts.Password != "" {
		nopts = append(nopts, nats.UserInfo(opts.User, opts.Password))
	}
	if (opts.TLSCert == "") != (opts.TLSKey == "") {
		return nil, errors.New("natsutil: connect: a TLS client certificate needs both a certificate and a key")
	}
	if opts.TLSCert != "" {
		nopts = append(nopts, nats.ClientCert(opts.TLSCert, opts.TLSKey))
	}
	if opts.TLSCA != "" {
		nopts = append(nopts, nats.RootCAs(opts.TLSCA))
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nopts...)
	if err != nil {
		return nil, fmt.Errorf("natsutil: connect to %s: %w", strings.Join(urls, ","), err)
	}
	return nc, nil
}

// refusals logs why attempts to (re)connect fail, as what they are: the
// server refused the credentials ("authorization violation"), the TLS
// handshake failed (an untrusted CA), or no server answered. The same
// reason is logged once every 10 seconds, a new one at once.
func refusals(log *slog.Logger) func(*nats.Conn, error) {
	var last string
	var at time.Time
	return func(_ *nats.Conn, err error) {
		if err == nil {
			return
		}
		reason := err.Error()
		if reason == last && time.Since(at) < 10*time.Second {
			return
		}
		last, at = reason, time.Now()
		log.Warn("nats connection refused; retrying", "reason", describeRefusal(err))
	}
}

// describeRefusal names the kind of a connection failure.
func describeRefusal(err error) string {
	var cert *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return "the server refused the credentials: " + err.Error()
	case errors.As(err, &cert), errors.As(err, &unknown):
		return "TLS: the server's certificate is not trusted (check --nats-tls-ca): " + err.Error()
	case errors.Is(err, nats.ErrNoServers):
		return "no server answered: " + err.Error()
	}
	return err.Error()
}

// IsLoopback reports whether host (a name or an IP address) is only
// reachable from this machine.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
