package merger

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestRecoverToTurnsAGoroutinePanicIntoAnError(t *testing.T) {
	m := &merge{opts: Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	var got error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer m.recoverTo(func(err error) { got = err })
		var cols []int
		_ = cols[len(m.opts.TempDir)] // index out of range
	}()
	<-done
	if !errors.Is(got, ErrInternal) || !strings.Contains(got.Error(), "index out of range") {
		t.Fatalf("err %v, want ErrInternal with the panic's message", got)
	}
}
