package natsutil

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/messages"
)

// RecordingFormat names the job-stream recording format (see the package
// documentation, # Recordings).
const RecordingFormat = "strata-stream-recording"

// RecordingVersion is the recording format version this package writes and reads.
const RecordingVersion = 1

// recordingHeader is the first line of a recording.
type recordingHeader struct {
	Format   string    `json:"format"`
	Version  int       `json:"version"`
	Stream   string    `json:"stream"`
	Recorded time.Time `json:"recorded"`
	Messages int       `json:"messages"`
}

// RecordedMsg is one message of a recording.
type RecordedMsg struct {
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	MsgID   string    `json:"msg_id,omitempty"`
	Time    time.Time `json:"time"`
	Data    []byte    `json:"data"` // base64 in the file
}

// RecordStream writes every message stored in stream, oldest first, to w
// in the recording format, and returns how many it wrote. Messages
// published while it runs are not included.
func RecordStream(ctx context.Context, js jetstream.JetStream, stream string, w io.Writer) (int, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("natsutil: record stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("natsutil: record stream %s: %w", stream, err)
	}
	last := info.State.LastSeq
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	hdr := recordingHeader{Format: RecordingFormat, Version: RecordingVersion, Stream: stream, Recorded: time.Now().UTC(), Messages: int(info.State.Msgs)}
	if err := enc.Encode(hdr); err != nil {
		return 0, err
	}
	n := 0
	if info.State.Msgs > 0 {
		c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			return 0, fmt.Errorf("natsutil: record stream %s: %w", stream, err)
		}
		for {
			msg, err := c.Next(jetstream.FetchContext(ctx))
			if err != nil {
				return n, fmt.Errorf("natsutil: record stream %s after %d messages: %w", stream, n, err)
			}
			md, err := msg.Metadata()
			if err != nil {
				return n, err
			}
			rec := RecordedMsg{Seq: md.Sequence.Stream, Subject: msg.Subject(), Time: md.Timestamp.UTC(), Data: msg.Data()}
			if h := msg.Headers(); h != nil {
				rec.MsgID = h.Get(messages.HeaderMsgID)
			}
			if err := enc.Encode(rec); err != nil {
				return n, err
			}
			n++
			if md.Sequence.Stream >= last {
				break
			}
		}
	}
	return n, bw.Flush()
}

// ReadRecording reads a recording written by RecordStream.
func ReadRecording(r io.Reader) ([]RecordedMsg, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	var hdr recordingHeader
	if err := dec.Decode(&hdr); err != nil {
		return nil, fmt.Errorf("natsutil: recording header: %w", err)
	}
	if hdr.Format != RecordingFormat {
		return nil, fmt.Errorf("natsutil: not a stream recording (format %q)", hdr.Format)
	}
	if hdr.Version != RecordingVersion {
		return nil, fmt.Errorf("natsutil: recording version %d, this build reads %d", hdr.Version, RecordingVersion)
	}
	var msgs []RecordedMsg
	for {
		var m RecordedMsg
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("natsutil: recording message %d: %w", len(msgs)+1, err)
		}
		if m.Subject == "" {
			return nil, fmt.Errorf("natsutil: recording message %d (seq %d): no subject", len(msgs)+1, m.Seq)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// Replay publishes recorded messages in order, on their original subjects
// and with their original Nats-Msg-Id, so replaying twice within the
// duplicate window publishes each once. progress, if set, is called after
// each message.
func Replay(ctx context.Context, js jetstream.JetStream, msgs []RecordedMsg, progress func(done int)) error {
	for i, m := range msgs {
		msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
		if m.MsgID != "" {
			msg.Header.Set(messages.HeaderMsgID, m.MsgID)
		}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("natsutil: replay message %d (seq %d, %s): %w", i+1, m.Seq, m.Subject, err)
		}
		if progress != nil {
			progress(i + 1)
		}
	}
	return nil
}
