package verify

// Event signatures checked on every core beside a stream of events: the
// export's in-order checker and the service's heal scan both decide which key
// is in force where they stand (that depends on what came before) and hand
// the Ed25519 work, the bulk of a signed chain's cost, to workers.

import (
	"crypto/ed25519"
	"encoding/json"
	"sync"
	"sync/atomic"
)

// SignatureChecks verifies event signatures in chunks on worker goroutines.
// The caller submits from one goroutine; the channel to the workers is
// bounded, so the caller waits when the workers are behind and at most a few
// chunks (and the memory their messages point into) are held. Each failure
// goes to onFail, on a worker, in whatever order the workers find them; the
// tag is the caller's, to say which event failed.
type SignatureChecks[T any] struct {
	chunks    chan []sigJob[T]
	pending   []sigJob[T]
	onFail    func(tag T)
	anyFailed atomic.Bool
	verified  atomic.Int64
	workers   sync.WaitGroup
}

// sigChunk is how many signatures one worker takes at a time: large enough
// that handing them over costs nothing next to an Ed25519 check, small
// enough that every core shares the tail of the stream.
const sigChunk = 32

type sigJob[T any] struct {
	pub ed25519.PublicKey // nil: no usable key (the check fails)
	// msg is the message the signature signs (signedMessage) when signed is
	// set, else the raw it is computed from; msgErr, when raw could not be
	// canonicalised.
	msg    []byte
	msgErr error
	signed bool
	sig    string
	tag    T
}

// NewSignatureChecks returns checks whose failures go to onFail, which must
// be safe to call from several goroutines; workers sizes the queue to them.
// Start runs workers; a caller with workers of its own (VerifyExport's
// pipeline) feeds them from chunks.
func NewSignatureChecks[T any](workers int, onFail func(tag T)) *SignatureChecks[T] {
	return &SignatureChecks[T]{chunks: make(chan []sigJob[T], 2*workers), onFail: onFail}
}

// Start runs n workers that check every chunk submitted until Close.
func (c *SignatureChecks[T]) Start(n int) {
	for range n {
		c.workers.Go(func() {
			for jobs := range c.chunks {
				c.check(jobs)
			}
		})
	}
}

// Submit queues a check of signatureB64 over raw as VerifyEventSignature
// makes it, under pub (nil: the stored key is unusable, and the check fails).
func (c *SignatureChecks[T]) Submit(pub ed25519.PublicKey, raw json.RawMessage, signatureB64 string, tag T) {
	c.submit(sigJob[T]{pub: pub, msg: raw, sig: signatureB64, tag: tag})
}

// submitSigned queues a check over msg, already what the signature signs
// (signedMessage computed it, or failed with msgErr).
func (c *SignatureChecks[T]) submitSigned(pub ed25519.PublicKey, msg []byte, msgErr error, signatureB64 string, tag T) {
	c.submit(sigJob[T]{pub: pub, msg: msg, msgErr: msgErr, signed: true, sig: signatureB64, tag: tag})
}

func (c *SignatureChecks[T]) submit(j sigJob[T]) {
	if c.pending == nil {
		c.pending = make([]sigJob[T], 0, sigChunk)
	}
	c.pending = append(c.pending, j)
	if len(c.pending) == sigChunk {
		c.Flush()
	}
}

// Flush hands the pending signatures to the workers.
func (c *SignatureChecks[T]) Flush() {
	if len(c.pending) > 0 {
		c.chunks <- c.pending
		c.pending = nil
	}
}

// Close flushes, ends the workers and waits for those Start ran: every
// submitted signature is checked when it returns.
func (c *SignatureChecks[T]) Close() {
	c.Flush()
	close(c.chunks)
	c.workers.Wait()
}

// Failed reports whether a check failed so far.
func (c *SignatureChecks[T]) Failed() bool { return c.anyFailed.Load() }

// Verified is how many signatures verified so far.
func (c *SignatureChecks[T]) Verified() int64 { return c.verified.Load() }

func (c *SignatureChecks[T]) check(jobs []sigJob[T]) {
	verified := int64(0)
	for _, j := range jobs {
		msg, err := j.msg, j.msgErr
		if err == nil && !j.signed {
			msg, err = signedMessage(msg)
		}
		if err == nil && j.pub == nil {
			err = ErrBadSignature
		}
		if err == nil {
			err = verifySignedMessage(j.pub, msg, j.sig)
		}
		if err != nil {
			c.onFail(j.tag)
			c.anyFailed.Store(true)
			continue
		}
		verified++
	}
	c.verified.Add(verified)
}
