package natsembed

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/strata-db/strata/internal/natsutil"
)

// Permissions returns g as nats-server permissions.
func Permissions(g natsutil.Grant) *server.Permissions {
	p := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append([]string(nil), g.Publish...)},
		Subscribe: &server.SubjectPermission{Allow: append([]string(nil), g.Subscribe...)},
	}
	if g.Responses {
		p.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION}
	}
	return p
}

// bcryptCost is the cost of the password hashes the embedded server
// keeps: the server holds only hashes, and each connection checks one.
const bcryptCost = 8

// Users returns a nats-server user for every role in passwords (role ->
// password) with the role's permissions; the server is given bcrypt
// hashes, not the passwords. An unknown role is an error.
func Users(passwords map[string]string) ([]*server.User, error) {
	var users []*server.User
	for _, role := range natsutil.Roles() {
		pw, ok := passwords[role]
		if !ok {
			continue
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcryptCost)
		if err != nil {
			return nil, fmt.Errorf("natsembed: password of %s: %w", role, err)
		}
		g, _ := natsutil.RoleGrant(role)
		users = append(users, &server.User{Username: role, Password: string(hash), Permissions: Permissions(g)})
	}
	for role := range passwords {
		if _, ok := natsutil.RoleGrant(role); !ok {
			return nil, fmt.Errorf("natsembed: unknown role %q", role)
		}
	}
	return users, nil
}
