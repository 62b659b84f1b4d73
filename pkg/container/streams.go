package container

import (
	"io"
	"sync"
)

// ExecStreams returns the writers an engine copies an exec's standard output and error into
// from two goroutines: one lock serializes both (a writer given for both, or two that share
// state, see the lines whole and in order), and a missing writer discards.
func ExecStreams(opts ExecOptions) (stdout, stderr io.Writer) {
	mu := &sync.Mutex{}
	return &lockedWriter{w: orDiscard(opts.Stdout), mu: mu}, &lockedWriter{w: orDiscard(opts.Stderr), mu: mu}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
