package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/pgauth"
)

func init() {
	register(command{
		name:    "auth init",
		summary: "make the per-role NATS passwords in DATA/nats-auth (the scheduler's embedded server does this itself)",
		run:     runAuthInit,
	})
	register(command{
		name:    "auth server-config",
		summary: "print a nats-server authorization block with the roles of DATA/nats-auth and their permissions",
		run:     runAuthServerConfig,
	})
	register(command{
		name:    "auth pg-user",
		summary: "add or change a user of the PostgreSQL front door (pgwire) in DATA/pg-auth",
		run:     runAuthPgUser,
	})
	register(command{
		name:    "auth permissions",
		summary: "print the roles' permissions as nats-server variables (deploy/nats/permissions.conf)",
		run:     runAuthPermissions,
	})
}

func authDataDir(name string, args []string) (string, error) {
	cmd := newCmdLine(name, "usage: strata "+name+" [--data DIR]")
	data := cmd.fs.String("data", "data", "data directory")
	if err := cmd.parse(args); err != nil {
		return "", err
	}
	return *data, nil
}

func runAuthInit(_ context.Context, args []string) error {
	data, err := authDataDir("auth init", args)
	if err != nil {
		return err
	}
	if _, err := natsutil.EnsureCredentials(data); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "passwords of %d roles in %s\n", len(natsutil.Roles()), natsutil.AuthDir(data))
	return nil
}

func runAuthServerConfig(_ context.Context, args []string) error {
	data, err := authDataDir("auth server-config", args)
	if err != nil {
		return err
	}
	passwords, err := natsutil.EnsureCredentials(data)
	if err != nil {
		return err
	}
	conf, err := natsutil.ServerConfig(passwords)
	if err != nil {
		return err
	}
	_, err = os.Stdout.WriteString(conf)
	return err
}

func runAuthPermissions(_ context.Context, args []string) error {
	cmd := newCmdLine("auth permissions", "usage: strata auth permissions")
	if err := cmd.parse(args); err != nil {
		return err
	}
	_, err := os.Stdout.WriteString(natsutil.PermissionsConfig())
	return err
}

// runAuthPgUser adds a user of pgwire, or gives an existing one a new
// password and role. Only the salted SCRAM verifier is kept in
// DATA/pg-auth/NAME.user; the password comes from --password-file, or is
// made at random and written to DATA/pg-auth/NAME.password (0600) for the
// operator to hand on.
func runAuthPgUser(_ context.Context, args []string) error {
	cmd := newCmdLine("auth pg-user", "usage: strata auth pg-user NAME [--role read|write] [--password-file FILE] [--data DIR]\n\n"+
		"Adds a user of the PostgreSQL front door (pgwire), or sets an existing one's role and password.\n"+
		"Without --password-file the password is made at random and written to DATA/pg-auth/NAME.password.\n"+
		"A running pgwire reads users at each connection: no restart is needed.")
	data := cmd.fs.String("data", "data", "data directory")
	role := cmd.fs.String("role", pgauth.RoleRead, "read (queries) or write (queries; statements that change data when the front door takes them)")
	pwFile := cmd.fs.String("password-file", "", "read the password from the first line of FILE instead of making one")
	name, err := cmd.parseArg(args, "want the user name")
	if err != nil {
		return err
	}
	if err := pgauth.ValidName(name); err != nil {
		return cmd.usageError(err.Error())
	}
	if *role != pgauth.RoleRead && *role != pgauth.RoleWrite {
		return cmd.usageError(fmt.Sprintf("--role %q: want read or write", *role))
	}
	var password string
	if *pwFile != "" {
		b, err := os.ReadFile(*pwFile)
		if err != nil {
			return fmt.Errorf("--password-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if password = strings.TrimSpace(line); password == "" {
			return fmt.Errorf("--password-file %s: empty password", *pwFile)
		}
	} else {
		if password, err = pgauth.NewPassword(); err != nil {
			return err
		}
		if err := pgauth.WritePassword(*data, name, password); err != nil {
			return err
		}
	}
	if err := pgauth.SetUser(*data, name, *role, password); err != nil {
		return err
	}
	if *pwFile == "" {
		fmt.Fprintf(os.Stderr, "user %s (role %s); its password is in %s\n", name, *role, pgauth.PasswordFile(*data, name))
	} else {
		fmt.Fprintf(os.Stderr, "user %s (role %s), password from %s\n", name, *role, *pwFile)
	}
	return nil
}
