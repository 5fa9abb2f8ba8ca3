package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{name: "deadletter", summary: "the dead letters: messages a service rejected, with subject, class, reason, time and size", run: runDeadLetter})
}

// deadLetter is one message of the DEADLETTER stream, as its headers
// describe it (see natsutil.PublishDeadLetter).
type deadLetter struct {
	seq       uint64
	msg       *jetstream.RawStreamMsg
	subject   string // where it arrived, from Strata-Subject or the dead-letter subject
	streamSeq any    // its sequence in the original stream; nil if unknown
	delivery  any    // the delivery attempt rejected; nil if unknown
}

func runDeadLetter(ctx context.Context, args []string) error {
	cmd := newCmdLine("deadletter", "usage: strata deadletter [--limit N] [--subject S] [--format table|json|csv] [flags]\n\n"+
		"Lists the newest messages of the DEADLETTER stream, oldest of them first: the subject each\n"+
		"arrived on, the service that rejected it, the class (malformed, failed, rejected) and reason,\n"+
		"when it was rejected, and its size. The messages stay in the stream.")
	var nf natsFlags
	nf.register(cmd.fs)
	limit := cmd.fs.Int("limit", 50, "newest dead letters to show (0: every one the stream keeps)")
	subject := cmd.fs.String("subject", "", "only messages that arrived on this subject (a trailing .> or * matches as in NATS)")
	format := cmd.fs.String("format", "table", formatUsage)
	if err := cmd.parse(args); err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	if *limit < 0 {
		return cmd.usageError("--limit must not be negative")
	}
	nc, js, err := nf.connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", nf.common.NATS, err)
	}
	defer nc.Close()
	letters, err := readDeadLetters(ctx, js, *limit, *subject)
	if err != nil {
		return err
	}
	t := newTable("seq", "time", "subject", "service", "class", "reason", "stream_seq", "delivery", "size:size_bytes")
	for _, d := range letters {
		h := d.msg.Header
		t.add(int64(d.seq), d.msg.Time.UTC(), d.subject, textCell(h.Get(messages.HeaderService)), textCell(h.Get(messages.HeaderClass)),
			textCell(h.Get(messages.HeaderReason)), d.streamSeq, d.delivery, size(len(d.msg.Data)))
	}
	return t.print(os.Stdout, *format)
}

// readDeadLetters reads the newest limit (0: all) dead letters whose
// original subject matches filter (empty: all), from the last message
// back, and returns them oldest first.
func readDeadLetters(ctx context.Context, js jetstream.JetStream, limit int, filter string) ([]deadLetter, error) {
	s, err := js.Stream(ctx, messages.StreamDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", messages.StreamDeadLetter, err)
	}
	info := s.CachedInfo()
	var out []deadLetter
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0 && (limit == 0 || len(out) < limit); seq-- {
		msg, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted, or aged out while we read
		}
		if err != nil {
			return nil, fmt.Errorf("dead letter %d: %w", seq, err)
		}
		d := deadLetter{seq: seq, msg: msg, subject: msg.Header.Get(messages.HeaderSubject)}
		if d.subject == "" {
			d.subject = strings.TrimPrefix(msg.Subject, messages.SubjectDeadLetterBase)
		}
		if !subjectMatches(filter, d.subject) {
			continue
		}
		if n, err := strconv.ParseUint(msg.Header.Get(messages.HeaderStreamSeq), 10, 64); err == nil {
			d.streamSeq = int64(n)
		}
		if n, err := strconv.ParseUint(msg.Header.Get(messages.HeaderDelivery), 10, 64); err == nil {
			d.delivery = int64(n)
		}
		out = append(out, d)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// subjectMatches reports whether subject matches filter as a NATS
// subscription would: "*" matches one token, a final ">" the rest. An
// empty filter matches everything.
func subjectMatches(filter, subject string) bool {
	if filter == "" {
		return true
	}
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" && i == len(ft)-1 {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}
