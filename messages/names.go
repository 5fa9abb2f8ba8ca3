package messages

import (
	"errors"
	"fmt"
)

// MaxNameLen bounds every name on the wire that becomes a path element.
const MaxNameLen = 128

// ResultProjection is the projection of every window result container:
// DATA/<result table>/result/<output>/.
const ResultProjection = "result"

// ReservedTable is the directory of the embedded NATS server's store under
// the data directory (DATA/nats); no table may take its name.
const ReservedTable = "nats"

// ErrInvalidName is wrapped by every error of ValidName.
var ErrInvalidName = errors.New("messages: invalid name")

// ValidName is the one check of every name that travels on the wire and
// becomes a path element in the data directory: tables, projections,
// container IDs, result tables, job outputs (and pool names). A valid name
// is 1 to MaxNameLen bytes of ASCII letters, digits, '_', '-' and '.',
// beginning with a letter, digit or '_' (so never '.', '..', a hidden
// name or an option such as "-rf"). It has no separator, NUL or other
// byte outside that set, so it is always one local path element.
func ValidName(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%w %.40q...: %d bytes, more than %d", ErrInvalidName, s, len(s), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case (c == '-' || c == '.') && i > 0:
		default:
			return fmt.Errorf("%w %q: byte %q at %d", ErrInvalidName, s, c, i)
		}
	}
	return nil
}

// ValidTable is ValidName for a table, which also may not be ReservedTable.
func ValidTable(s string) error {
	if err := ValidName(s); err != nil {
		return err
	}
	if s == ReservedTable {
		return fmt.Errorf("%w %q: reserved for the NATS store", ErrInvalidName, s)
	}
	return nil
}

// validName is kept for the call sites that predate ValidName.
func validName(s string) error { return ValidName(s) }

// validRef checks a container reference's table, projection and ID.
func validRef(c ContainerRef) error {
	if err := ValidTable(c.Table); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	if err := ValidName(c.Projection); err != nil {
		return fmt.Errorf("projection: %w", err)
	}
	if err := ValidName(c.ID); err != nil {
		return fmt.Errorf("id: %w", err)
	}
	return nil
}
