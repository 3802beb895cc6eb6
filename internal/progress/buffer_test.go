package progress

import (
	"strings"
	"sync"
)

// signalBuffer is a writer the Line's own timer and the test share; each
// write is signalled on wrote.
type signalBuffer struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{}
}

func (b *signalBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return b.b.Write(p)
}

func (b *signalBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// count is the number of draws so far.
func (b *signalBuffer) count() int { return strings.Count(b.text(), "\r") }
