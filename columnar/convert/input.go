package convert

import (
	"context"
	"io"

	"github.com/apache/arrow-go/v18/parquet"
)

// ctxReader is an io.Reader that fails once ctx is done, so that an import
// stops at its next read.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ctxReaderAt is ctxReader for Parquet input. It hides any Close of the
// underlying reader (the Parquet reader closes a source that has one): the
// file is closed by whoever opened it.
type ctxReaderAt struct {
	ctx context.Context
	r   parquet.ReaderAtSeeker
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(p, off)
}

func (c ctxReaderAt) Seek(offset int64, whence int) (int64, error) {
	return c.r.Seek(offset, whence)
}
