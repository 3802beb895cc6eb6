package mail_test

import (
	"net"
	"sync"
	"testing"
)

// The SMTP server these tests deliver to is mailtest.Server; this file keeps
// only what no other package's tests need.

// silentListener accepts connections and never says a word, like a server
// that hangs; accepted reports each connection it holds.
func silentListener(t *testing.T) (addr string, accepted <-chan net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 16)
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			ch <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return l.Addr().String(), ch
}
