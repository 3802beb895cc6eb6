package verify

// Reading an export for VerifyExport: lines in, decoded batches out in order.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// The pipeline: one goroutine reads lines into batches; workers decode them and
// recompute payload hashes; VerifyExport consumes batches in order from order.
const batchLines = 256

type item struct {
	no      int64
	blank   bool
	line    exportLine
	err     error
	hash    Hash
	hashErr error
	// signed is what the event's signature signs (its canonical raw), for
	// events that carry one; signedErr when raw cannot be canonicalised.
	signed    []byte
	signedErr error
}

type batch struct {
	first   int64
	buf     []byte
	ends    []int
	items   []item
	readErr error
	done    chan struct{}
}

type pipeline struct {
	order chan *batch
	sigs  *SignatureChecks[sigAt]
	quit  chan struct{}
	wg    sync.WaitGroup
}

// startPipeline reads r on one goroutine and decodes it on workers, which
// also check the signatures submitted to sigs beside the decoding.
func startPipeline(r io.Reader, workers int, sigs *SignatureChecks[sigAt]) *pipeline {
	p := &pipeline{order: make(chan *batch, 2*workers+2), quit: make(chan struct{}), sigs: sigs}
	work := make(chan *batch, 2*workers+2)
	p.wg.Go(func() {
		defer close(p.order)
		defer close(work)
		br := bufio.NewReaderSize(r, 256<<10)
		next := int64(1)
		hint := 64 << 10
		for eof := false; !eof; {
			b := &batch{first: next, buf: make([]byte, 0, hint), done: make(chan struct{})}
			for len(b.ends) < batchLines {
				var err error
				b.buf, err = readLine(br, b.buf)
				if err == io.EOF {
					eof = true
					if len(b.buf) == lastEnd(b.ends) {
						break
					}
				} else if err != nil {
					b.readErr, eof = err, true
					break
				}
				b.ends = append(b.ends, len(b.buf))
				next++
				if eof {
					break
				}
			}
			hint = max(hint, len(b.buf)+len(b.buf)/8)
			select {
			case p.order <- b:
			case <-p.quit:
				return
			}
			select {
			case work <- b:
			case <-p.quit:
				return
			}
		}
	})
	for range workers {
		p.wg.Go(func() {
			var scratch []byte
			work, chunks := work, p.sigs.chunks
			for work != nil || chunks != nil {
				select {
				case b, ok := <-work:
					if !ok {
						work = nil
						continue
					}
					scratch = b.decode(scratch)
					close(b.done)
				case jobs, ok := <-chunks:
					if !ok {
						chunks = nil
						continue
					}
					p.sigs.check(jobs)
				}
			}
		})
	}
	return p
}

// stop ends the reader and workers and waits for them; every signature
// submitted is checked when it returns.
func (p *pipeline) stop() {
	p.sigs.Close()
	close(p.quit)
	for range p.order { // unblock nothing; just drop queued batches
	}
	p.wg.Wait()
}

func lastEnd(ends []int) int {
	if len(ends) == 0 {
		return 0
	}
	return ends[len(ends)-1]
}

// readLine appends the next line, without its newline, to buf.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	start := len(buf)
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf)-start > MaxExportLine+1 {
			return buf, fmt.Errorf("line longer than %d bytes", MaxExportLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if n := len(buf); n > start && buf[n-1] == '\n' {
			buf = buf[:n-1]
			if n := len(buf); n > start && buf[n-1] == '\r' {
				buf = buf[:n-1]
			}
		}
		return buf, err
	}
}

func (b *batch) decode(scratch []byte) []byte {
	b.items = make([]item, len(b.ends))
	start := 0
	for i, end := range b.ends {
		it := &b.items[i]
		it.no = b.first + int64(i)
		line := b.buf[start:end]
		start = end
		if len(bytes.TrimSpace(line)) == 0 {
			it.blank = true
			continue
		}
		// Event lines in the writer's shape skip encoding/json; anything
		// else (other kinds, unusual spelling) takes it, errors included.
		if !decodeEventLine(line, &it.line) {
			if err := json.Unmarshal(line, &it.line); err != nil {
				it.err = fmt.Errorf("not JSON: %v", err)
				continue
			}
		}
		if it.err = it.line.check(); it.err != nil {
			continue
		}
		if e := it.line.Event; e != nil {
			var signed []byte
			scratch, it.hash, signed, it.hashErr = eventHash(&e.HashedEvent, scratch)
			if e.Signature != nil {
				if signed == nil {
					signed, it.signedErr = signedMessage(e.Raw)
				}
				it.signed = signed
			}
		}
	}
	return scratch
}
