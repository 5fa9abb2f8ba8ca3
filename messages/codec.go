package messages

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Version is the wire version this package writes and the only one it reads.
const Version = 1

// MaxMessageBytes is the largest message a decoder accepts. It matches the
// default NATS payload limit.
const MaxMessageBytes = 1 << 20

// Message is implemented by every wire type.
type Message interface {
	// Kind is the stable name of the type on the wire.
	Kind() string
}

var (
	// ErrMalformed is returned (wrapped) for input that is not a well-formed
	// message: not msgpack, wrong shape, wrong kind, too large.
	ErrMalformed = errors.New("messages: malformed message")
)

// UnknownVersionError is returned for a message whose version this build
// does not read.
type UnknownVersionError struct {
	Kind    string
	Version uint64
}

func (e *UnknownVersionError) Error() string {
	return fmt.Sprintf("messages: %s: unknown version %d (this build reads version %d)", e.Kind, e.Version, Version)
}

// Marshal encodes m in the format described in the package documentation.
func Marshal(m Message) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.EncodeArrayLen(3); err != nil {
		return nil, err
	}
	if err := enc.EncodeUint(Version); err != nil {
		return nil, err
	}
	if err := enc.EncodeString(m.Kind()); err != nil {
		return nil, err
	}
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("messages: encode %s: %w", m.Kind(), err)
	}
	if buf.Len() > MaxMessageBytes {
		return nil, fmt.Errorf("messages: encode %s: %d bytes exceeds the %d-byte limit", m.Kind(), buf.Len(), MaxMessageBytes)
	}
	return buf.Bytes(), nil
}

// PeekKind returns the kind and version of an encoded message without
// decoding its body.
func PeekKind(data []byte) (kind string, version uint64, err error) {
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	return readHeader(dec, len(data))
}

func readHeader(dec *msgpack.Decoder, size int) (string, uint64, error) {
	if size > MaxMessageBytes {
		return "", 0, fmt.Errorf("%w: %d bytes exceeds the %d-byte limit", ErrMalformed, size, MaxMessageBytes)
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return "", 0, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if n != 3 {
		return "", 0, fmt.Errorf("%w: header: array of %d elements, want 3", ErrMalformed, n)
	}
	version, err := dec.DecodeUint64()
	if err != nil {
		return "", 0, fmt.Errorf("%w: version: %v", ErrMalformed, err)
	}
	kind, err := dec.DecodeString()
	if err != nil {
		return "", 0, fmt.Errorf("%w: kind: %v", ErrMalformed, err)
	}
	return kind, version, nil
}

// Unmarshal decodes data into m, checking the version and that the kind on
// the wire is m's kind, then validates m if it has a Validate method. It
// never panics on malformed input.
func Unmarshal(data []byte, m Message) error { return unmarshal(data, m, true) }

// UnmarshalUnvalidated is Unmarshal without the Validate call, for a value
// stored as it was accepted whose validation belongs to a later reader: the
// window query of a job the scheduler keeps, which the windower validates
// when it runs the job (and fails the job, with the reason, if it must).
func UnmarshalUnvalidated(data []byte, m Message) error { return unmarshal(data, m, false) }

func unmarshal(data []byte, m Message, validate bool) (err error) {
	defer func() {
		// msgpack's reflection decoder is not hardened against every
		// hostile input; a panic there must not take a service down.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrMalformed, m.Kind(), r)
		}
	}()
	r := bytes.NewReader(data)
	dec := msgpack.NewDecoder(r)
	kind, version, err := readHeader(dec, len(data))
	if err != nil {
		return err
	}
	if kind != m.Kind() {
		return fmt.Errorf("%w: kind %q, want %q", ErrMalformed, kind, m.Kind())
	}
	if version != Version {
		return &UnknownVersionError{Kind: kind, Version: version}
	}
	if err := dec.Decode(m); err != nil {
		return fmt.Errorf("%w: %s body: %v", ErrMalformed, kind, err)
	}
	if r.Len() != 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", ErrMalformed, kind, r.Len())
	}
	if v, ok := m.(interface{ Validate() error }); ok && validate {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrMalformed, kind, err)
		}
	}
	return nil
}
