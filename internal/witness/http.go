package witness

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
)

// MaxRequestBytes bounds an add-checkpoint body: 63 proof lines and a
// checkpoint with its signatures are a few kilobytes.
const MaxRequestBytes = 64 << 10

// Handler serves tlog-witness at the root: POST /add-checkpoint (the
// submission prefix) and GET /<origin hash>/checkpoint (the monitoring
// prefix).
func Handler(w *Witness, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxRequestBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(rw, fmt.Sprintf("request body over %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(rw, "reading the request body failed", http.StatusBadRequest)
			return
		}
		cosig, err := w.AddCheckpoint(r.Context(), body)
		if err != nil {
			writeError(rw, log, err, body)
			return
		}
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Write(cosig)
	})
	mux.HandleFunc("GET /{origin_hash}/checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		cp, ok, err := w.Checkpoint(r.Context(), r.PathValue("origin_hash"))
		if err != nil {
			writeError(rw, log, err, nil)
			return
		}
		if !ok {
			http.Error(rw, "this witness never cosigned a checkpoint of that log", http.StatusNotFound)
			return
		}
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rw.Write(cp)
	})
	return mux
}

// Status is the HTTP status tlog-witness gives err.
func Status(err error) int {
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict):
		return http.StatusConflict
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownLog):
		return http.StatusNotFound
	case errors.Is(err, ErrNoLogSignature):
		return http.StatusForbidden
	case errors.Is(err, ErrNotConsistent):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

func writeError(rw http.ResponseWriter, log *slog.Logger, err error, body []byte) {
	status := Status(err)
	var conflict *ConflictError
	switch {
	case errors.As(err, &conflict):
		// tlog-witness: the body is the size last cosigned, in decimal and
		// a newline, typed text/x.tlog.size.
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(status)
		io.WriteString(rw, strconv.FormatUint(conflict.Size, 10)+"\n")
		return
	case status == http.StatusInternalServerError:
		log.Error("witness: internal error", "err", err)
		http.Error(rw, "internal error", status)
		return
	case status == http.StatusUnprocessableEntity:
		// The log's key signed a checkpoint inconsistent with one it
		// signed before (or the client sent a wrong proof): tlog-witness
		// allows keeping such a request as possible evidence of a
		// misbehaving log, so the request is logged whole.
		log.Warn("witness: refused a validly signed checkpoint", "err", err, "request", string(body))
	default:
		// 400, 403, 404: anyone can send those; not worth more than debug.
		log.Debug("witness: refused a request", "status", status, "err", err)
	}
	http.Error(rw, err.Error(), status)
}
