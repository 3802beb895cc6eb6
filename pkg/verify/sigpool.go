package verify

// Event signature checks handed from VerifyExport's checker to the workers
// of its pipeline.

import (
	"crypto/ed25519"
	"sync"
	"sync/atomic"
)

// sigChecks hands event signatures from the in-order checker to the
// pipeline's workers, in chunks, and remembers the failure on the earliest
// line. The checker only decides which key is in force (that depends on the
// machine_key lines before the event); the Ed25519 work, the bulk of a signed
// export's cost, runs on every core beside the decoding.
type sigChecks struct {
	chunks   chan []sigJob // bounded: the checker waits when the workers are behind
	pending  []sigJob
	mu       sync.Mutex
	first    *Error
	failed   atomic.Bool
	verified atomic.Int64
}

// sigChunk is how many signatures one worker takes at a time: large enough
// that handing them over costs nothing next to ~40 µs per check, small
// enough that both cores share the tail of an export.
const sigChunk = 32

type sigJob struct {
	line   int64
	seq    int64
	pub    ed25519.PublicKey
	msg    []byte // the canonical raw the signature signs (signedMessage)
	msgErr error
	sig    string
}

func (c *sigChecks) submit(j sigJob) {
	if c.pending == nil {
		c.pending = make([]sigJob, 0, sigChunk)
	}
	c.pending = append(c.pending, j)
	if len(c.pending) == sigChunk {
		c.flush()
	}
}

// flush hands the pending signatures to the workers.
func (c *sigChecks) flush() {
	if len(c.pending) > 0 {
		c.chunks <- c.pending
		c.pending = nil
	}
}

func (c *sigChecks) check(jobs []sigJob) {
	verified := int64(0)
	for _, j := range jobs {
		err := j.msgErr
		if err == nil {
			err = verifySignedMessage(j.pub, j.msg, j.sig)
		}
		if err != nil {
			c.fail(&Error{Kind: KindSignature, Sequence: j.seq, Block: -1, Line: j.line, Err: ErrBadSignature})
			continue
		}
		verified++
	}
	c.verified.Add(verified)
}

func (c *sigChecks) fail(e *Error) {
	c.mu.Lock()
	if c.first == nil || e.Line < c.first.Line {
		c.first = e
	}
	c.mu.Unlock()
	c.failed.Store(true)
}
