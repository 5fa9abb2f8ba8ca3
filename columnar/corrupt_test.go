package columnar

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// genOne writes one small container and returns its directory and manifest.
func genOne(t testing.TB) (string, *Manifest) {
	t.Helper()
	data := t.TempDir()
	ms, err := Generate(data, GenOptions{Columns: 4, KeyColumns: 2, Containers: 1, RowsPerContainer: 1000, BlockRows: 256, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	return ContainerDir(data, "t", "p", ms[0].ID), ms[0]
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func wantCorrupt(t *testing.T, err error, file string, block int) {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want a *CorruptError", err)
	}
	if ce.File != file || ce.Block != block {
		t.Fatalf("corrupt error names %s block %d, want %s block %d (%v)", ce.File, ce.Block, file, block, err)
	}
	if !strings.Contains(err.Error(), ce.Container) || ce.Container == "" {
		t.Fatalf("error does not name the container: %v", err)
	}
}

func TestCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, m *Manifest)
		file   func(m *Manifest) string
		block  int
		// openFails: the reader already fails at OpenColumn (not only Verify).
		readFails bool
	}{
		{
			name: "flipped byte in block 2",
			damage: func(t *testing.T, dir string, m *Manifest) {
				b := m.Files[1].Blocks[2]
				flipByte(t, filepath.Join(dir, m.Files[1].Name), b.Offset+b.Length/2)
			},
			file: func(m *Manifest) string { return m.Files[1].Name }, block: 2, readFails: true,
		},
		{
			name: "flipped byte in block 0 prefix",
			damage: func(t *testing.T, dir string, m *Manifest) {
				flipByte(t, filepath.Join(dir, m.Files[0].Name), m.Files[0].Blocks[0].Offset+5)
			},
			file: func(m *Manifest) string { return m.Files[0].Name }, block: 0, readFails: true,
		},
		{
			name: "flipped byte in header",
			damage: func(t *testing.T, dir string, m *Manifest) {
				flipByte(t, filepath.Join(dir, m.Files[2].Name), 20)
			},
			file: func(m *Manifest) string { return m.Files[2].Name }, block: NoBlock, readFails: true,
		},
		{
			name: "flipped byte in footer",
			damage: func(t *testing.T, dir string, m *Manifest) {
				flipByte(t, filepath.Join(dir, m.Files[3].Name), m.Files[3].Size-12)
			},
			file: func(m *Manifest) string { return m.Files[3].Name }, block: NoBlock,
		},
		{
			name: "truncated file",
			damage: func(t *testing.T, dir string, m *Manifest) {
				if err := os.Truncate(filepath.Join(dir, m.Files[1].Name), m.Files[1].Size/2); err != nil {
					t.Fatal(err)
				}
			},
			file: func(m *Manifest) string { return m.Files[1].Name }, block: NoBlock, readFails: true,
		},
		{
			name: "missing file",
			damage: func(t *testing.T, dir string, m *Manifest) {
				if err := os.Remove(filepath.Join(dir, m.Files[2].Name)); err != nil {
					t.Fatal(err)
				}
			},
			file: func(m *Manifest) string { return m.Files[2].Name }, block: NoBlock, readFails: true,
		},
		{
			name: "manifest not JSON",
			damage: func(t *testing.T, dir string, m *Manifest) {
				os.WriteFile(filepath.Join(dir, ManifestName), []byte("{\"version\": 1, "), 0o644)
			},
			file: func(*Manifest) string { return ManifestName }, block: NoBlock, readFails: true,
		},
		{
			name: "manifest inconsistent",
			damage: func(t *testing.T, dir string, m *Manifest) {
				m2 := *m
				m2.Rows++
				b, _ := m2.Encode()
				os.WriteFile(filepath.Join(dir, ManifestName), b, 0o644)
			},
			file: func(*Manifest) string { return ManifestName }, block: NoBlock, readFails: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, m := genOne(t)
			tc.damage(t, dir, m)
			wantCorrupt(t, Verify(dir), tc.file(m), tc.block)
			if !tc.readFails {
				return
			}
			// Reading every column the ordinary way fails with the same error.
			c, err := Open(dir, OpenOptions{})
			if err != nil {
				wantCorrupt(t, err, tc.file(m), tc.block)
				return
			}
			var readErr error
			for col := range m.Files {
				r, err := c.OpenColumn(col)
				if err != nil {
					readErr = err
					break
				}
				for {
					a, err := r.Next()
					if err != nil {
						if err.Error() != "EOF" {
							readErr = err
						}
						break
					}
					a.Release()
				}
				r.Close()
				if readErr != nil {
					break
				}
			}
			wantCorrupt(t, readErr, tc.file(m), tc.block)
		})
	}
}
