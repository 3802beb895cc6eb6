package verify

// ExportWriter: how the service writes an export (the format is export.go's).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// ExportWriter writes an export. The service calls the Write methods in chain
// order (see the package comment at the top of this file) and then Close.
type ExportWriter struct {
	w           *bufio.Writer
	enc         *json.Encoder
	events      int64
	checkpoints int64
	size        uint64
	err         error
}

// NewExportWriter writes the header; an empty Format or Origin is filled in.
func NewExportWriter(w io.Writer, h ExportHeader) (*ExportWriter, error) {
	if h.Format == "" {
		h.Format = ExportFormat
	}
	if h.Origin == "" {
		h.Origin = Origin(h.UserID)
	}
	if h.Format != ExportFormat || h.Origin != Origin(h.UserID) {
		return nil, fmt.Errorf("export header: format %q origin %q do not match %q %q", h.Format, h.Origin, ExportFormat, Origin(h.UserID))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	x := &ExportWriter{w: bw, enc: json.NewEncoder(bw), size: h.Start}
	x.enc.SetEscapeHTML(false)
	return x, x.write(exportLine{Kind: LineHeader, Header: &h})
}

func (x *ExportWriter) write(l exportLine) error {
	if x.err == nil {
		x.err = x.enc.Encode(&l)
	}
	return x.err
}

// WriteFrontier writes the frontier of a fragment, right after the header.
func (x *ExportWriter) WriteFrontier(f ExportFrontier) error {
	return x.write(exportLine{Kind: LineFrontier, Frontier: &f})
}

// WriteMachineKey puts a key in force for the events written after it; write
// it before the first event it applies to (leaf k.EffectiveFromLeaf), never
// before that many leaves.
func (x *ExportWriter) WriteMachineKey(k ExportMachineKey) error {
	return x.write(exportLine{Kind: LineMachineKey, MachineKey: &k})
}

// WriteEvent writes the next stored event. raw is re-serialised compactly;
// its canonical form, and so payload_hash, is unchanged.
func (x *ExportWriter) WriteEvent(e *ExportEvent) error {
	x.events++
	x.size++
	return x.write(exportLine{Kind: LineEvent, Event: e})
}

// WriteConsistency writes the proof that must precede a checkpoint whose size
// differs from the number of leaves written so far.
func (x *ExportWriter) WriteConsistency(c ExportConsistency) error {
	return x.write(exportLine{Kind: LineConsistency, Consistency: &c})
}

// WriteCheckpoint writes a block's signed note verbatim, with the
// witnesses' cosignature lines on it, if any.
func (x *ExportWriter) WriteCheckpoint(block int64, signedNote []byte, cosignatures ...string) error {
	x.checkpoints++
	return x.write(exportLine{Kind: LineCheckpoint, Checkpoint: &ExportCheckpoint{Block: block, Note: string(signedNote), Cosignatures: cosignatures}})
}

// Close writes the end line and flushes; it does not close the underlying writer.
func (x *ExportWriter) Close() error {
	if err := x.write(exportLine{Kind: LineEnd, End: &ExportEnd{Events: x.events, Checkpoints: x.checkpoints, TreeSize: x.size}}); err != nil {
		return err
	}
	return x.w.Flush()
}
