// Package messages defines every message strata's services exchange over NATS:
// jobs, job events, update events, and the requests and replies of the
// strata.api.* subjects, together with the subjects and stream names they
// travel on.
//
// Engine packages never import NATS; they import these plain types.
//
// # Format
//
// Every message is one msgpack array of exactly three elements:
//
//	[version uint, kind string, body map]
//
// version is the wire version of the message (Version, currently 1). A decoder
// rejects any other version with an *UnknownVersionError rather than guess.
// kind names the Go type of body ("mergeout_job", "update_event", ...), so a
// message published on the wrong subject is refused with a clear error
// instead of being half-decoded into the wrong struct. body is the msgpack
// encoding of the struct, with field names given by its msgpack tags; fields a
// decoder does not know are skipped, so a newer producer may add optional
// fields without bumping the version.
//
// Messages carry references and specs, never bulk data: the default NATS
// payload limit is 1 MB, and bulk results live in containers.
package messages
