package main

import (
	"context"
	"fmt"
	"os"

	"github.com/strata-db/strata/internal/natsutil"
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
