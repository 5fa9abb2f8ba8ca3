package depot

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/strata-db/strata/columnar"
)

// heldFile is one reader's handle on a column file the depot holds (in
// the container's pack, or a file of the first layout). It checks what it
// reads of the file's header and blocks against the manifest's CRC-32C
// (the column reader checks it again: this check is the depot's, to know
// the file is bad) and takes a failed check, a short read or any other
// read error as damage done on disk since it was taken in: it drops the
// column file from the depot (marking it not held in the pack, or
// removing the file, so nobody opens it again; readers that have it open
// find the damage themselves), opens it again (a fill, fetching from the
// store, or what another reader's refetch has put in its place) and reads
// the range once more. Only a second failure is an error. A refetch of
// the file does not touch the container's other column files.
type heldFile struct {
	s  *source
	fm *columnar.FileMeta

	mu sync.Mutex // serializes reads, which may swap cur
	// cur is what is read: the held file; after a refetch, the fill (or
	// the file that replaced the damaged one). nil after Close.
	cur columnar.File
	// gen is the generation of the held file cur is (entry.gens), so a
	// reader that finds damage another already dropped the file for does
	// not drop its replacement.
	gen uint64
}

// ReadAt reads len(p) bytes at off, fetching the file again if they are
// damaged.
func (h *heldFile) ReadAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return 0, fmt.Errorf("read %s/%s: %w", h.s.e.dir, h.fm.Name, os.ErrClosed)
	}
	n, err := h.cur.ReadAt(p, off)
	if _, fill := h.cur.(*fillFile); fill {
		return n, err // the store's bytes, as fetched
	}
	damage := h.damage(p, off, n, err)
	if damage == "" {
		return n, err
	}
	d, e := h.s.d, h.s.e
	d.drop(e, h.fm, h.gen, damage)
	f, gen, oerr := h.s.open(h.fm)
	if oerr != nil {
		return 0, fmt.Errorf("depot: %s/%s is damaged (%s); fetching it again: %w", e.dir, h.fm.Name, damage, oerr)
	}
	h.cur.Close()
	h.cur, h.gen = f, gen
	n, err = h.cur.ReadAt(p, off)
	if err != nil {
		return n, fmt.Errorf("depot: %s/%s was damaged (%s); read again: %w", e.dir, h.fm.Name, damage, err)
	}
	if again := h.damage(p, off, n, nil); again != "" {
		from := "the file that replaced it"
		if ff, ok := h.cur.(*fillFile); ok {
			from = "the copy fetched again from store object " + ff.f.key
		}
		return n, fmt.Errorf("depot: container %s: %s was damaged on disk (%s), and %s is bad too (%s)", key(e.table, e.projection, e.id), h.fm.Name, damage, from, again)
	}
	return n, nil
}

// damage says what is wrong with the n bytes read into p from off (with
// error err): "" if nothing, or nothing the depot can tell (a range that
// is neither the header nor a block).
func (h *heldFile) damage(p []byte, off int64, n int, err error) string {
	fm := h.fm
	if err != nil || n < len(p) {
		what := "header"
		if off >= fm.HeaderLen {
			i := sort.Search(len(fm.Blocks), func(i int) bool { return fm.Blocks[i].Offset+fm.Blocks[i].Length > off })
			what = fmt.Sprintf("block %d", i)
			if i == len(fm.Blocks) {
				what = "footer"
			}
		}
		return fmt.Sprintf("%s: read %d of %d bytes at offset %d: %v", what, n, len(p), off, err)
	}
	if off == 0 && int64(len(p)) == fm.HeaderLen {
		if got := crc32.Checksum(p, castagnoli); got != fm.HeaderCRC {
			return fmt.Sprintf("header checksum %08x, manifest says %08x", got, fm.HeaderCRC)
		}
		return ""
	}
	i := sort.Search(len(fm.Blocks), func(i int) bool { return fm.Blocks[i].Offset >= off })
	if i < len(fm.Blocks) && fm.Blocks[i].Offset == off && fm.Blocks[i].Length == int64(len(p)) {
		if got := crc32.Checksum(p, castagnoli); got != fm.Blocks[i].CRC {
			return fmt.Sprintf("block %d checksum %08x, manifest says %08x", i, got, fm.Blocks[i].CRC)
		}
	}
	return ""
}

// Local is true for the held file; after a refetch, the fill's.
func (h *heldFile) Local(off, length int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur == nil || h.cur.Local(off, length)
}

func (h *heldFile) Size() int64 { return h.fm.Size }

// Close closes what the handle reads.
func (h *heldFile) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return nil
	}
	err := h.cur.Close()
	h.cur = nil
	return err
}

// drop drops the column file fm of e, found damaged, if the depot still
// holds the generation gen of it (another reader may have dropped it
// already, and a fill may have replaced it).
func (d *Depot) drop(e *entry, fm *columnar.FileMeta, gen uint64, damage string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.present[fm.Name] == 0 || e.gens[fm.Name] != gen {
		return
	}
	d.dropLocked(e, fm, damage)
}

// dropLocked removes the column file fm the depot holds in e, to be
// fetched again by the next reader to open it: out of the entry and its
// bytes, off the disk (readers with it open keep reading what they
// opened), and into a new generation. d.mu is held.
func (d *Depot) dropLocked(e *entry, fm *columnar.FileMeta, damage string) {
	container := key(e.table, e.projection, e.id)
	if p := e.pack; p != nil {
		// Its range of the pack is filled again in place; readers with it
		// open find the damage (or the bytes being rewritten) themselves.
		d.log.Warn("depot: a column file it holds is damaged; fetching it again", "container", container, "pack", p.path, "file", fm.Name, "damage", damage)
		if err := p.setHeld(e.files[fm.Name], false); err != nil {
			d.log.Warn("depot: mark a damaged column file not held", "pack", p.path, "file", fm.Name, "err", err)
		}
	} else {
		path := filepath.Join(e.dir, fm.Name)
		d.log.Warn("depot: a column file it holds is damaged; fetching it again", "container", container, "file", path, "damage", damage)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("depot: remove a damaged file", "file", path, "err", err)
		}
	}
	delete(e.present, fm.Name)
	e.size -= fm.Size
	d.used -= fm.Size
	if e.gens == nil {
		e.gens = map[string]uint64{}
	}
	e.gens[fm.Name]++
	d.damaged.Add(1)
}
