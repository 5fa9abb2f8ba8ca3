package integration

// The chaos suite's keyed table: loaded once at setup, changed by every
// round's update traffic (inserts, updates and deletes published from the
// test, one per event or a dozen in a change batch, each message retried
// with its Nats-Msg-Id until JetStream acknowledges it),
// applied by the walwriter and folded by mergeouts while the round's fault
// happens. The test keeps the model: the loaded rows, then every
// acknowledged change replayed in the order of the stream sequence its
// publish ack gave (a retried publish that JetStream deduplicated is acked
// with the sequence it was stored at). After each round, once the
// walwriter's ack floor reaches the stream's last sequence, a window query
// must return the model exactly, and again after a full mergeout, whose one
// container must hold exactly the model's rows.

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

const (
	chaosKeyedTable = "kv"
	chaosKeyedRows  = 3000 // loaded: ids 1..3000
	chaosKeyedIDs   = 3500 // changes touch ids 1..3500: some insert new keys
)

// chaosKeyedTypes are the columns of the keyed table: id int64 (the key),
// g int64, s text (NULL now and then).
var chaosKeyedTypes = []messages.RowType{messages.RowInt64, messages.RowInt64, messages.RowText}

// keyedChange is one change of the keyed table as the test published it.
type keyedChange struct {
	id     int64
	row    []any // nil: a delete
	delete bool
	order  int // its index in its batch
}

// keyedState is the model of the keyed table.
type keyedState struct {
	mu      sync.Mutex
	loaded  map[int64][]any
	acked   map[uint64][]keyedChange // by the stream sequence of the publish ack: an event's change, or a batch's in order
	ids     map[uint64]string        // event or batch ID by stream sequence
	seqOf   map[string]uint64        // stream sequence by event ID (a batch's, and each of its changes')
	changes map[string]keyedChange   // the change of each event ID (a batch's changes': <batch ID>/<index>)
	dead    map[string]string        // change events dead-lettered (not applied), with the reason
	dupAcks int                      // publishes acked as duplicates (a retry of a stored one)
	failed  []string                 // publishes never acknowledged
	checks  int                      // rounds whose table equalled the model
}

// loadKeyed loads the keyed table (chaosKeyedRows rows, 16 rows a block,
// so a few hundred blocks) and sets up its model.
func (c *chaos) loadKeyed(t *testing.T) {
	t.Helper()
	k := &keyedState{loaded: map[int64][]any{}, acked: map[uint64][]keyedChange{}, ids: map[uint64]string{},
		seqOf: map[string]uint64{}, changes: map[string]keyedChange{}, dead: map[string]string{}}
	var b strings.Builder
	b.WriteString("id,g,s\n")
	for id := int64(1); id <= chaosKeyedRows; id++ {
		var s any = fmt.Sprintf("loaded-%d-%s", id, strings.Repeat("x", int(id%11)*4))
		field := s.(string)
		if id%13 == 0 {
			s, field = nil, ""
		}
		k.loaded[id] = []any{id, id % 7, s}
		fmt.Fprintf(&b, "%d,%d,%s\n", id, id%7, field)
	}
	path := filepath.Join(t.TempDir(), chaosKeyedTable+".csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c.cliRetry(60*time.Second, "load", "--table", chaosKeyedTable, "--csv", path, "--schema", "id int64, g int64, s varchar",
		"--sort-key", "g, id", "--primary-key", "id", "--block-rows", "16")
	c.keyed = k
	// The walwriter's table cache learns the table on its first event.
	c.checkKeyed(t, "loaded")
}

// chaosChange is change i of a round: a key drawn from 1..chaosKeyedIDs,
// deleted one time in five, else given a new row (the text 20..200 bytes,
// so the WAL fills its segments).
func chaosChange(prefix string, seed, i int) (*messages.UpdateEvent, keyedChange, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
	id := 1 + rng.Int64N(chaosKeyedIDs)
	key, err := messages.EncodeRow(chaosKeyedTypes[:1], []any{id})
	if err != nil {
		return nil, keyedChange{}, err
	}
	ev := &messages.UpdateEvent{EventID: fmt.Sprintf("%s-%d", prefix, i), Table: chaosKeyedTable, Columns: chaosKeyedTypes, Key: key}
	if rng.IntN(5) == 0 {
		ev.Op = messages.OpDelete
		return ev, keyedChange{id: id, delete: true}, nil
	}
	ev.Op = messages.OpUpdate
	if id > chaosKeyedRows {
		ev.Op = messages.OpInsert
	}
	var s any = fmt.Sprintf("%s-%d-%s", prefix, i, strings.Repeat(string(rune('a'+rng.IntN(26))), 20+rng.IntN(180)))
	if rng.IntN(10) == 0 {
		s = nil
	}
	row := []any{id, rng.Int64N(7), s}
	if ev.NewRow, err = messages.EncodeRow(chaosKeyedTypes, row); err != nil {
		return nil, keyedChange{}, err
	}
	return ev, keyedChange{id: id, row: row}, nil
}

// publishChanges publishes changes from..to-1 of the keyed table (IDs
// prefix-from..), inflight messages at a time: about half of them one
// event per message, the others in change batches of 12 (IDs
// prefix-b<first>+<count>), which change a key several times now and
// then. Each message is retried with its ID until JetStream acknowledges
// it (at most 3 minutes), and every acknowledged change is recorded in the
// model by its stream sequence.
func (c *chaos) publishChanges(t *testing.T, prefix string, seed, from, to, inflight int) {
	k := c.keyed
	next := make(chan chaosChunk)
	var wg sync.WaitGroup
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ck := range next {
				id, data, chs, err := chaosMessage(prefix, seed, ck.first, ck.n)
				if err != nil {
					t.Errorf("keyed: %v", err)
					continue
				}
				msg := &nats.Msg{Subject: messages.SubjectUpdates(chaosKeyedTable), Data: data, Header: nats.Header{}}
				msg.Header.Set(messages.HeaderMsgID, id)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				ack, err := natsutil.PublishRetry(ctx, c.js, msg)
				cancel()
				k.mu.Lock()
				switch {
				case err != nil:
					k.failed = append(k.failed, fmt.Sprintf("%s: %v", id, err))
				case k.ids[ack.Sequence] != "" && k.ids[ack.Sequence] != id:
					t.Errorf("keyed: publish of %s acked with stream sequence %d, which acked %s before", id, ack.Sequence, k.ids[ack.Sequence])
				case k.ids[ack.Sequence] == id:
					k.dupAcks++ // recorded at its first ack
				default:
					k.ids[ack.Sequence] = id
					k.seqOf[id] = ack.Sequence
					for eventID, ch := range chs {
						k.acked[ack.Sequence] = append(k.acked[ack.Sequence], ch)
						k.seqOf[eventID] = ack.Sequence
						k.changes[eventID] = ch
					}
					slices.SortFunc(k.acked[ack.Sequence], func(a, b keyedChange) int { return a.order - b.order })
					if ack.Duplicate {
						k.dupAcks++
					}
				}
				k.mu.Unlock()
			}
		}()
	}
	for _, ck := range chaosChunks(from, to) {
		next <- ck
	}
	close(next)
	wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.failed) > 0 {
		t.Errorf("keyed: %d publishes never acknowledged (the model cannot tell whether they are stored), e.g. %v",
			len(k.failed), k.failed[:min(3, len(k.failed))])
	}
}

// chaosChunk is the changes first..first+n-1, published as one message.
type chaosChunk struct{ first, n int }

// chaosChunks splits changes from..to-1 into messages: runs of 7 single
// events and batches of 12 (or what is left), in turn.
func chaosChunks(from, to int) []chaosChunk {
	var out []chaosChunk
	for i := from; i < to; {
		n := 1
		if (i/7)%2 == 0 {
			n = min(12, to-i)
		}
		out = append(out, chaosChunk{i, n})
		i += n
	}
	return out
}

// chaosWALIDs are the event IDs the WAL logs for changes from..to-1 as
// publishChanges sends them: an event's ID, and for a batch the IDs of
// the changes the walwriter keeps (the last of each key).
func chaosWALIDs(prefix string, seed, from, to int) ([]string, error) {
	var ids []string
	for _, ck := range chaosChunks(from, to) {
		_, _, chs, err := chaosMessage(prefix, seed, ck.first, ck.n)
		if err != nil {
			return nil, err
		}
		for id := range chs {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// chaosMessage is the message of changes first..first+n-1: one update
// event when n is 1, else a change batch. It returns the message's ID and
// bytes, and its changes by their event IDs (a batch's: the last change of
// each key, under <batch ID>/<index>, as the walwriter logs them).
func chaosMessage(prefix string, seed, first, n int) (string, []byte, map[string]keyedChange, error) {
	if n == 1 {
		ev, ch, err := chaosChange(prefix, seed, first)
		if err != nil {
			return "", nil, nil, fmt.Errorf("change %d: %w", first, err)
		}
		data, err := messages.Marshal(ev)
		return ev.EventID, data, map[string]keyedChange{ev.EventID: ch}, err
	}
	b := &messages.ChangeBatch{BatchID: fmt.Sprintf("%s-b%d+%d", prefix, first, n), Table: chaosKeyedTable, Columns: chaosKeyedTypes}
	chs := make([]keyedChange, n)
	for j := range n {
		ev, ch, err := chaosChange(prefix, seed, first+j)
		if err != nil {
			return "", nil, nil, fmt.Errorf("change %d: %w", first+j, err)
		}
		ch.order = j
		chs[j] = ch
		b.Changes = append(b.Changes, messages.Change{Op: ev.Op, Key: ev.Key, NewRow: ev.NewRow})
	}
	out := map[string]keyedChange{}
	for _, j := range b.LastPerKey() {
		out[messages.ChangeEventID(b.BatchID, j)] = chs[j]
	}
	data, err := messages.Marshal(b)
	return b.BatchID, data, out, err
}

// modelRows is the keyed table as the replay of the acknowledged changes
// not dead-lettered, as the check query prints it: id|g|s|n, n the rows of
// the row's g, sorted.
func (k *keyedState) modelRows() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	rows := make(map[int64][]any, len(k.loaded))
	for id, r := range k.loaded {
		rows[id] = r
	}
	seqs := make([]uint64, 0, len(k.acked))
	for s := range k.acked {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		if k.dead[k.ids[s]] != "" {
			continue
		}
		for _, ch := range k.acked[s] {
			if ch.delete {
				delete(rows, ch.id)
			} else {
				rows[ch.id] = ch.row
			}
		}
	}
	perG := map[int64]int{}
	for _, r := range rows {
		perG[r[1].(int64)]++
	}
	out := make([]string, 0, len(rows))
	for id, r := range rows {
		s := "NULL"
		if r[2] != nil {
			s = r[2].(string)
		}
		out = append(out, fmt.Sprintf("%d|%d|%s|%d", id, r[1].(int64), s, perG[r[1].(int64)]))
	}
	slices.Sort(out)
	return out
}

// queryKeyedChaos reads the keyed table through a window query (asked
// again while a query fails, for up to 2 minutes).
func (c *chaos) queryKeyedChaos(t *testing.T) ([]string, error) {
	out := filepath.Join(t.TempDir(), fmt.Sprintf("kv-%d.csv", time.Now().UnixNano()))
	sql := fmt.Sprintf("SELECT id, g, s, count(*) OVER (PARTITION BY g) AS n FROM %s", chaosKeyedTable)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, errOut, err := c.cli(ctx, "window", "--out", out, sql)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("window query over %s: still failing after 2m: %v: %s", chaosKeyedTable, err, tail(strings.TrimSpace(errOut), 5))
		}
		time.Sleep(500 * time.Millisecond)
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, fmt.Errorf("window result of %s: %w", chaosKeyedTable, err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("window result %s: %w", out, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("window result %s: no header", out)
	}
	rows := make([]string, 0, len(recs)-1)
	for _, rec := range recs[1:] {
		if rec[2] == "" {
			rec[2] = "NULL"
		}
		rows = append(rows, strings.Join(rec, "|"))
	}
	slices.Sort(rows)
	return rows, nil
}

// waitAckFloor waits until the walwriter consumer's ack floor reaches the
// UPDATES stream's last sequence: every change then visible (or
// dead-lettered).
func (c *chaos) waitAckFloor(t *testing.T, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last, floor uint64
	var pending, unacked int
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := func() error {
			s, err := c.js.Stream(ctx, messages.StreamUpdates)
			if err != nil {
				return err
			}
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			last = info.State.LastSeq
			cons, err := c.js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter)
			if err != nil {
				return err
			}
			ci, err := cons.Info(ctx)
			if err != nil {
				return err
			}
			floor, pending, unacked = ci.AckFloor.Stream, int(ci.NumPending), ci.NumAckPending
			return nil
		}()
		cancel()
		if err == nil && floor >= last {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("walwriter's ack floor %d short of the UPDATES stream's last sequence %d after %v (%d pending, %d unacked; last error %v)",
				floor, last, timeout, pending, unacked, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkKeyed: once every change is acked, the keyed table read through a
// window query is the model; after a full mergeout it still is, and the one
// container it leaves holds exactly the model's rows.
func (c *chaos) checkKeyed(t *testing.T, what string) {
	t.Helper()
	k := c.keyed
	start := time.Now()
	if err := c.waitAckFloor(t, settleBound); err != nil {
		t.Errorf("keyed %s: %v", what, err)
		return
	}
	want := k.modelRows()
	got, err := c.queryKeyedChaos(t)
	if err != nil {
		t.Errorf("keyed %s: %v", what, err)
		return
	}
	if !c.sameRows(t, what+": the table read through a window query", got, want) {
		return
	}
	_, errOut := c.cliRetry(2*time.Minute, "mergeout", chaosKeyedTable)
	st := c.catalogEntry(t, chaosKeyedTable)
	if len(st.Live) != 1 {
		t.Errorf("keyed %s: after a full mergeout %s/p has %d live containers, want 1 (strata mergeout said: %s)",
			what, chaosKeyedTable, len(st.Live), tail(strings.TrimSpace(errOut), 5))
	} else if st.Live[0].Rows != int64(len(want)) {
		t.Errorf("keyed %s: the merged container %s holds %d rows, the model %d", what, st.Live[0].ID, st.Live[0].Rows, len(want))
	}
	if got, err = c.queryKeyedChaos(t); err != nil {
		t.Errorf("keyed %s: after the full mergeout: %v", what, err)
		return
	}
	if c.sameRows(t, what+": the table after a full mergeout", got, want) {
		k.mu.Lock()
		k.checks++
		k.mu.Unlock()
		t.Logf("keyed %s: %s equals the model (%d rows), before and after a full mergeout; checked in %v",
			what, chaosKeyedTable, len(want), time.Since(start).Round(time.Millisecond))
	}
	// Nothing half-written is left beside the containers. A committed
	// container that is not live is an apply that did not land (its
	// scheduler killed, say; the next flush wrote a later one) or a
	// retired input not deleted yet: the scheduler's orphan sweep and
	// deletion of dead containers take them, so they are only counted.
	committed, other := containers(t, c.dataDir, chaosKeyedTable, "p")
	if len(other) > 0 {
		t.Errorf("keyed %s: %s/p holds uncommitted entries %v", what, chaosKeyedTable, other)
	}
	live := map[string]bool{}
	for _, ref := range st.Live {
		live[ref.ID] = true
	}
	var notLive []string
	for _, id := range committed {
		if !live[id] {
			notLive = append(notLive, id)
		}
	}
	if len(notLive) > 0 {
		t.Logf("keyed %s: %d committed containers of %s/p not live (orphans or dead ones not deleted yet): %v",
			what, len(notLive), chaosKeyedTable, notLive[:min(5, len(notLive))])
	}
}

// sameRows reports whether got equals want, else fails the test saying how
// they differ (by key: missing, extra, different).
func (c *chaos) sameRows(t *testing.T, what string, got, want []string) bool {
	t.Helper()
	if slices.Equal(got, want) {
		return true
	}
	byID := func(rows []string) map[string]string {
		m := make(map[string]string, len(rows))
		for _, r := range rows {
			m[r[:strings.IndexByte(r, '|')]] = r
		}
		return m
	}
	g, w := byID(got), byID(want)
	var missing, extra, differ []string
	for id, r := range w {
		switch gr, ok := g[id]; {
		case !ok:
			missing = append(missing, trunc(r))
		case gr != r:
			differ = append(differ, fmt.Sprintf("got %s want %s", trunc(gr), trunc(r)))
		}
	}
	for id, r := range g {
		if _, ok := w[id]; !ok {
			extra = append(extra, trunc(r))
		}
	}
	dupes := len(got) - len(g)
	slices.Sort(missing)
	slices.Sort(extra)
	slices.Sort(differ)
	t.Errorf("keyed: %s: %d rows, the model %d: %d keys missing %v, %d keys not in the model %v, %d keys differ %v, %d rows of a key seen twice",
		what, len(got), len(want), len(missing), missing[:min(3, len(missing))], len(extra), extra[:min(3, len(extra))],
		len(differ), differ[:min(3, len(differ))], dupes)
	return false
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// keyedWALRecord says what is wrong with a WAL record of a change the
// suite published ("" if nothing): its version must be the stream sequence
// its publish ack gave, its kind a delete or a row as published.
func (c *chaos) keyedWALRecord(eventID string, version uint64, isDelete bool) string {
	k := c.keyed
	k.mu.Lock()
	defer k.mu.Unlock()
	seq, ok := k.seqOf[eventID]
	if !ok {
		return ""
	}
	if version != seq {
		return fmt.Sprintf("%s logged with version %d, published at stream sequence %d", eventID, version, seq)
	}
	if ch := k.changes[eventID]; ch.delete != isDelete {
		return fmt.Sprintf("%s published as delete=%v, logged as delete=%v", eventID, ch.delete, isDelete)
	}
	return ""
}

// keyedDead records the round's dead-lettered change events: they are not
// applied, so the model leaves them out.
func (c *chaos) keyedDead(t *testing.T, dead map[string]string) {
	k := c.keyed
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, reason := range dead {
		if _, ok := k.seqOf[id]; ok {
			k.dead[id] = reason
			// Every change the suite publishes is valid: a dead letter is
			// an acknowledged change that will never be applied.
			t.Errorf("keyed: valid change %s dead-lettered: %s", id, reason)
		}
	}
}
