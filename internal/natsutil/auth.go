package natsutil

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-db/strata/messages"
)

// The roles a strata deployment gives NATS users. Each role is one user
// (its name is the role's) with only the subjects that role uses.
const (
	RoleScheduler = "scheduler" // owns the topology: streams, consumers, buckets; answers strata.api.*
	RoleMerger    = "merger"    // pulls mergeout jobs, publishes their events
	RoleWindower  = "windower"  // pulls window jobs, publishes their events
	RoleWalwriter = "walwriter" // pulls update events
	RoleCLIAdmin  = "cli-admin" // the strata CLI: requests, updates, job record and replay
	RoleProducer  = "producer"  // an application that only publishes update events
	RolePgwire    = "pgwire"    // the SQL front door: window jobs, the catalog, change events; no admin requests
)

// Roles returns every role, in a fixed order.
func Roles() []string {
	return []string{RoleScheduler, RoleMerger, RoleWindower, RoleWalwriter, RoleCLIAdmin, RoleProducer, RolePgwire}
}

// AuthDirName is the directory of the data directory that holds the
// embedded server's credentials, one file per role.
const AuthDirName = "nats-auth"

// PasswordFileSuffix ends the name of a role's password file:
// DATA/nats-auth/merger.password.
const PasswordFileSuffix = ".password"

// InboxPrefix returns the inbox prefix a client authenticated as user
// uses for replies, "_INBOX.<user>", so each role may subscribe to its own
// replies only. A user name that cannot be a subject token gets the
// default prefix "_INBOX".
func InboxPrefix(user string) string {
	if user == "" || strings.ContainsAny(user, ".*> \t\r\n") {
		return "_INBOX"
	}
	return "_INBOX." + user
}

// Grant is what one role may publish and subscribe to. Responses lets it
// publish replies to the requests it receives (the reply subjects of
// other roles' inboxes), and nothing else on them.
type Grant struct {
	Publish   []string
	Subscribe []string
	Responses bool
}

// RoleGrant returns the grant of role, and false for an unknown role.
//
// The JetStream API subjects are those the nats.go jetstream package uses
// for each call strata makes: a worker's js.Consumer is
// $JS.API.CONSUMER.INFO.<stream>.<consumer>, each fetch a request on
// $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer> answered on the worker's
// inbox, each ack, nak and in-progress a publish on
// $JS.ACK.<stream>.<consumer>.>, and every JetStream publish a request
// whose acknowledgement comes back on the inbox.
func RoleGrant(role string) (Grant, bool) {
	inbox := InboxPrefix(role) + ".>"
	jobWorker := func(consumer, jobSubject string) Grant {
		return Grant{
			Publish: []string{
				"$JS.API.CONSUMER.INFO." + messages.StreamJobs + "." + consumer,
				"$JS.API.CONSUMER.MSG.NEXT." + messages.StreamJobs + "." + consumer,
				"$JS.ACK." + messages.StreamJobs + "." + consumer + ".>",
				// The max-deliveries watch reads the undelivered job.
				"$JS.API.STREAM.INFO." + messages.StreamJobs,
				"$JS.API.STREAM.MSG.GET." + messages.StreamJobs,
				"strata.events.*",
				messages.SubjectDeadLetter(jobSubject),
			},
			Subscribe: []string{
				inbox,
				"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + messages.StreamJobs + "." + consumer,
				messages.SubjectCancel, // the scheduler's cancel notices
			},
		}
	}
	switch role {
	case RoleScheduler:
		return Grant{
			Publish: []string{
				"$JS.API.>", // it ensures the streams, consumers and buckets, and reads them
				"$JS.ACK." + messages.StreamEvents + "." + messages.ConsumerScheduler + ".>",
				"$JS.FC.>", // flow control of its ordered consumers and watches
				"$KV." + messages.BucketCatalog + ".>",
				"$KV." + messages.BucketPools + ".>",
				messages.SubjectJobsAll,
				messages.SubjectEventsAll,
				messages.SubjectDeadLetterAll,
				messages.SubjectCancel, // telling workers to stop a cancelled job
			},
			Subscribe: []string{inbox, messages.SubjectAPIPrefix + ">"},
			Responses: true,
		}, true
	case RoleMerger:
		return jobWorker(messages.ConsumerMerger, messages.SubjectJobMergeout), true
	case RoleWindower:
		return jobWorker(messages.ConsumerWindower, messages.SubjectJobWindow), true
	case RoleWalwriter:
		return Grant{
			Publish: []string{
				"$JS.API.CONSUMER.INFO." + messages.StreamUpdates + "." + messages.ConsumerWalwriter,
				"$JS.API.CONSUMER.MSG.NEXT." + messages.StreamUpdates + "." + messages.ConsumerWalwriter,
				"$JS.ACK." + messages.StreamUpdates + "." + messages.ConsumerWalwriter + ".>",
				// The max-deliveries watch reads the event that ran out.
				"$JS.API.STREAM.INFO." + messages.StreamUpdates,
				"$JS.API.STREAM.MSG.GET." + messages.StreamUpdates,
				messages.SubjectDeadLetter(messages.SubjectUpdatesAll),
				// Applying changes: the keyed tables, and each batch made visible.
				messages.SubjectAPICatalog,
				messages.SubjectAPIApply,
			},
			Subscribe: []string{
				inbox,
				"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + messages.StreamUpdates + "." + messages.ConsumerWalwriter,
			},
		}, true
	case RoleCLIAdmin:
		return Grant{
			Publish: []string{
				messages.SubjectAPIPrefix + ">",
				messages.SubjectUpdatesAll,
				messages.SubjectJobsAll, // jobs replay
				"$JS.API.INFO",
				"$JS.API.STREAM.INFO.*",
				"$JS.API.STREAM.CREATE.*", // jobs replay into a fresh deployment
				// jobs record: an ordered consumer on JOBS.
				"$JS.API.CONSUMER.CREATE." + messages.StreamJobs,
				"$JS.API.CONSUMER.CREATE." + messages.StreamJobs + ".>",
				"$JS.API.CONSUMER.DELETE." + messages.StreamJobs + ".*",
				"$JS.API.CONSUMER.INFO." + messages.StreamJobs + ".*",
				"$JS.API.CONSUMER.MSG.NEXT." + messages.StreamJobs + ".*",
				// strata changes waits for the walwriter's ack floor: its changes visible.
				"$JS.API.CONSUMER.INFO." + messages.StreamUpdates + "." + messages.ConsumerWalwriter,
				"$JS.FC.>",
				// deadletter: reads the dead letters one by one.
				"$JS.API.STREAM.MSG.GET." + messages.StreamDeadLetter,
			},
			Subscribe: []string{inbox, messages.SubjectEventsAll},
		}, true
	case RoleProducer:
		return Grant{
			Publish: []string{
				messages.SubjectUpdatesAll,
				// Whether its changes are visible: the walwriter's ack floor.
				"$JS.API.CONSUMER.INFO." + messages.StreamUpdates + "." + messages.ConsumerWalwriter,
				// A table's primary key and containers (its schema), to
				// encode its changes.
				messages.SubjectAPICatalog,
			},
			Subscribe: []string{inbox},
		}, true
	case RolePgwire:
		return Grant{
			Publish: []string{
				// The requests services/pgwire makes, and none of the
				// admin ones (register, mergeout, pools.create/alter,
				// containers.drop, apply, reserve).
				messages.SubjectAPIWindow,
				messages.SubjectAPIOperations,
				messages.SubjectAPICatalog,
				// Ending the job of a cancelled or abandoned query.
				messages.SubjectAPIPrefix + "cancel",
				// INSERT, UPDATE, DELETE and COPY FROM: change events, and
				// whether they are visible (the walwriter's ack floor) or
				// were dead-lettered (read, never removed).
				messages.SubjectUpdatesAll,
				"$JS.API.CONSUMER.INFO." + messages.StreamUpdates + "." + messages.ConsumerWalwriter,
				"$JS.API.STREAM.INFO." + messages.StreamDeadLetter,
				"$JS.API.STREAM.MSG.GET." + messages.StreamDeadLetter,
			},
			// A query's done or failed event.
			Subscribe: []string{inbox, messages.SubjectEventsAll},
		}, true
	}
	return Grant{}, false
}

// AuthDir returns DATA/nats-auth.
func AuthDir(dataDir string) string { return filepath.Join(dataDir, AuthDirName) }

// PasswordFile returns the password file of role in dataDir.
func PasswordFile(dataDir, role string) string {
	return filepath.Join(AuthDir(dataDir), role+PasswordFileSuffix)
}

// EnsureCredentials returns a password for every role, read from
// DATA/nats-auth/<role>.password, creating the files that do not exist
// with a new random password (32 bytes from crypto/rand). The directory
// is mode 0700 and the files 0600; looser modes are tightened. Passwords
// are made once and reused on every later start; delete a file (or
// write a new password in it) and restart to rotate one.
func EnsureCredentials(dataDir string) (map[string]string, error) {
	dir := AuthDir(dataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("natsutil: credentials directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("natsutil: credentials directory: %w", err)
	}
	out := map[string]string{}
	for _, role := range Roles() {
		path := PasswordFile(dataDir, role)
		pw, err := ReadPasswordFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			pw, err = newPassword()
			if err == nil {
				err = writeSecret(path, pw)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("natsutil: credentials of %s: %w", role, err)
		}
		out[role] = pw
	}
	return out, nil
}

// ReadPasswordFile reads a password from path: the file's first line,
// without surrounding blanks. An empty password is an error. A file that
// others may read is tightened to 0600.
func ReadPasswordFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		_ = os.Chmod(path, 0o600) // best effort: the file may be someone else's
	}
	line, _, _ := strings.Cut(string(data), "\n")
	pw := strings.TrimSpace(line)
	if pw == "" {
		return "", fmt.Errorf("password file %s is empty", path)
	}
	return pw, nil
}

func newPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// writeSecret writes s to path (mode 0600) through a temporary file and a
// rename, so a reader never sees half a password.
func writeSecret(path, s string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(s + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ServerConfig returns a nats-server configuration fragment (the
// authorization block) with a user per role in passwords and its
// permissions, for running a separate nats-server with the credentials of
// a data directory (deploy/local does).
func ServerConfig(passwords map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("# strata roles and their permissions (generated; see README \"Security\").\nauthorization {\n  users: [\n")
	for _, role := range Roles() {
		pw, ok := passwords[role]
		if !ok {
			continue
		}
		if strings.ContainsAny(pw, "\"\\\n") {
			return "", fmt.Errorf("natsutil: password of %s has characters a config file cannot hold", role)
		}
		g, _ := RoleGrant(role)
		fmt.Fprintf(&b, "    {user: %q, password: %q, permissions: {\n", role, pw)
		fmt.Fprintf(&b, "      publish: {allow: %s}\n", quoteList(g.Publish))
		fmt.Fprintf(&b, "      subscribe: {allow: %s}\n", quoteList(g.Subscribe))
		if g.Responses {
			b.WriteString("      allow_responses: true\n")
		}
		b.WriteString("    }}\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}

// PermissionsConfig returns the nats-server configuration variables
// SCHEDULER_PERMISSIONS, MERGER_PERMISSIONS, ... that deploy/nats
// includes (deploy/nats/permissions.conf is this output).
func PermissionsConfig() string {
	var b strings.Builder
	b.WriteString("# Permissions of the strata roles, one variable per role, used by the\n# authorization blocks of nats-N.conf. Generated from the roles in\n# internal/natsutil/auth.go (`strata auth permissions`); a test checks that\n# this file matches them.\n")
	for _, role := range Roles() {
		g, _ := RoleGrant(role)
		fmt.Fprintf(&b, "\n%s_PERMISSIONS: {\n", strings.ToUpper(strings.ReplaceAll(role, "-", "_")))
		fmt.Fprintf(&b, "  publish: {allow: %s}\n", quoteList(g.Publish))
		fmt.Fprintf(&b, "  subscribe: {allow: %s}\n", quoteList(g.Subscribe))
		if g.Responses {
			b.WriteString("  allow_responses: true\n")
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
