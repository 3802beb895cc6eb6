package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Result is one workload's report (the median of its runs).
type Result struct {
	Workload string  `json:"workload"`
	Mode     string  `json:"mode"` // closed or open
	Rate     float64 `json:"rate,omitempty"`
	Clients  int     `json:"clients"`
	Accounts int     `json:"accounts"`
	Prefill  int     `json:"prefill,omitempty"`
	Runs     int     `json:"runs"`
	Seconds  float64 `json:"seconds"`
	Ops      int64   `json:"ops"`
	// OpsPerSec counts successful operations (requests; a hot-account append
	// that needed retries counts once).
	OpsPerSec float64 `json:"ops_per_sec"`
	// ItemsPerOp and ItemsPerSec count what operations carry when that is not
	// one: events per batch, events read per heal scan, deliveries per event.
	ItemsPerOp  float64          `json:"items_per_op,omitempty"`
	ItemsPerSec float64          `json:"items_per_sec,omitempty"`
	Latency     Latency          `json:"latency_ms"`
	Errors      map[string]int64 `json:"errors,omitempty"`
	Retries     int64            `json:"retries"`
	Server      *ServerStats     `json:"server,omitempty"`
	// Extra holds workload-specific figures (listeners: connect time, RSS…).
	Extra        map[string]float64 `json:"extra,omitempty"`
	RunOpsPerSec []float64          `json:"run_ops_per_sec,omitempty"`
	Error        string             `json:"error,omitempty"`
}

// Latency percentiles in milliseconds, from the due time in an open loop.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// ServerStats are sampled from /proc when the server runs on this machine.
type ServerStats struct {
	// CPUMicrosPerOp is the server's utime+stime over the measured window
	// divided by the successful operations.
	CPUMicrosPerOp   float64 `json:"cpu_us_per_op"`
	CPUMicrosPerItem float64 `json:"cpu_us_per_item,omitempty"`
	CPUCores         float64 `json:"cpu_cores"` // CPU seconds per second
	PeakRSSMB        float64 `json:"peak_rss_mb"`
	RSSMB            float64 `json:"rss_mb"`
	// BytesPerEvent is SQLite's growth on disk (database + WAL, after the
	// server stopped) per event stored in the run, prefill included.
	BytesPerEvent float64 `json:"bytes_per_event,omitempty"`
	// What the server wrote per successful operation over the measured
	// window (/proc/PID/io, issue #39): WriteBytesPerOp the bytes sent to
	// storage (write_bytes), WcharPerOp the bytes passed to write calls
	// (wchar: the WAL frames, the checkpoint's copy, the HTTP answers),
	// WriteCallsPerOp the write system calls (syscw, sockets included).
	WriteBytesPerOp float64 `json:"write_bytes_per_op,omitempty"`
	WcharPerOp      float64 `json:"wchar_per_op,omitempty"`
	WriteCallsPerOp float64 `json:"write_calls_per_op,omitempty"`
	// WALFramesPerOp is the pages the SQLite writer's commits wrote to the
	// WAL per successful operation over the window (one frame per page a
	// transaction dirtied, before the checkpoint copies them into the
	// database file), from the server's auditchain_sqlite_wal_frames_total.
	WALFramesPerOp float64 `json:"wal_frames_per_op,omitempty"`
}

// median folds several runs of one workload: every figure is the median of the
// runs' figures, errors are summed (none is hidden), the first error is kept.
func median(runs []Result) Result {
	if len(runs) == 1 {
		r := runs[0]
		r.RunOpsPerSec = nil
		return r
	}
	out := runs[0]
	out.Runs = len(runs)
	f := func(get func(*Result) float64) float64 {
		xs := make([]float64, 0, len(runs))
		for i := range runs {
			xs = append(xs, get(&runs[i]))
		}
		slices.Sort(xs)
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	out.Seconds = f(func(r *Result) float64 { return r.Seconds })
	out.Ops = int64(f(func(r *Result) float64 { return float64(r.Ops) }))
	out.OpsPerSec = f(func(r *Result) float64 { return r.OpsPerSec })
	out.ItemsPerOp = f(func(r *Result) float64 { return r.ItemsPerOp })
	out.ItemsPerSec = f(func(r *Result) float64 { return r.ItemsPerSec })
	out.Retries = int64(f(func(r *Result) float64 { return float64(r.Retries) }))
	out.Latency = Latency{
		P50:  f(func(r *Result) float64 { return r.Latency.P50 }),
		P90:  f(func(r *Result) float64 { return r.Latency.P90 }),
		P99:  f(func(r *Result) float64 { return r.Latency.P99 }),
		P999: f(func(r *Result) float64 { return r.Latency.P999 }),
		Max:  f(func(r *Result) float64 { return r.Latency.Max }),
		Mean: f(func(r *Result) float64 { return r.Latency.Mean }),
	}
	out.Errors = nil
	for _, r := range runs {
		for k, v := range r.Errors {
			if out.Errors == nil {
				out.Errors = map[string]int64{}
			}
			out.Errors[k] += v
		}
		if out.Error == "" {
			out.Error = r.Error
		}
		out.RunOpsPerSec = append(out.RunOpsPerSec, r.OpsPerSec)
	}
	var sampled []Result
	for _, r := range runs {
		if r.Server != nil {
			sampled = append(sampled, r)
		}
	}
	if len(sampled) > 0 {
		g := func(get func(*ServerStats) float64) float64 {
			return f2(sampled, get)
		}
		// given folds a figure only some runs have (a sample that failed
		// leaves it 0): the median of the runs that have it.
		given := func(get func(*ServerStats) float64) float64 {
			var with []Result
			for _, r := range sampled {
				if get(r.Server) > 0 {
					with = append(with, r)
				}
			}
			if len(with) == 0 {
				return 0
			}
			return f2(with, get)
		}
		out.Server = &ServerStats{
			CPUMicrosPerOp:   g(func(s *ServerStats) float64 { return s.CPUMicrosPerOp }),
			CPUMicrosPerItem: g(func(s *ServerStats) float64 { return s.CPUMicrosPerItem }),
			CPUCores:         g(func(s *ServerStats) float64 { return s.CPUCores }),
			PeakRSSMB:        g(func(s *ServerStats) float64 { return s.PeakRSSMB }),
			RSSMB:            g(func(s *ServerStats) float64 { return s.RSSMB }),
			BytesPerEvent:    g(func(s *ServerStats) float64 { return s.BytesPerEvent }),
			WriteBytesPerOp:  given(func(s *ServerStats) float64 { return s.WriteBytesPerOp }),
			WcharPerOp:       given(func(s *ServerStats) float64 { return s.WcharPerOp }),
			WriteCallsPerOp:  given(func(s *ServerStats) float64 { return s.WriteCallsPerOp }),
			WALFramesPerOp:   given(func(s *ServerStats) float64 { return s.WALFramesPerOp }),
		}
	}
	if out.Extra != nil {
		extra := map[string]float64{}
		for k := range out.Extra {
			extra[k] = f(func(r *Result) float64 { return r.Extra[k] })
		}
		out.Extra = extra
	}
	return out
}

func f2(rs []Result, get func(*ServerStats) float64) float64 {
	xs := make([]float64, len(rs))
	for i := range rs {
		xs[i] = get(rs[i].Server)
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// WriteJSON writes the results as one JSON document.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"results": rs})
}

// WriteTable writes the results for people: one row per workload, then the
// errors, extras and failures under it.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tmode\tclients\truns\tops\tops/s\titems/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors\tretries\tsrv µs/op\tsrv cores\tpeak RSS MB\tB/event\t")
	for _, r := range rs {
		mode := r.Mode
		if r.Mode == "open" {
			mode = "open@" + strconv.FormatFloat(r.Rate, 'f', -1, 64)
		}
		var nerr int64
		for _, v := range r.Errors {
			nerr += v
		}
		cpu, cores, rss, bpe := "-", "-", "-", "-"
		if s := r.Server; s != nil {
			cpu = num(s.CPUMicrosPerOp)
			cores = strconv.FormatFloat(s.CPUCores, 'f', 2, 64)
			rss = strconv.FormatFloat(s.PeakRSSMB, 'f', 1, 64)
			if s.BytesPerEvent > 0 {
				bpe = num(s.BytesPerEvent)
			}
		}
		items := "-"
		if r.ItemsPerSec > 0 {
			items = num(r.ItemsPerSec)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n",
			r.Workload, mode, r.Clients, r.Runs, r.Ops, num(r.OpsPerSec), items,
			ms(r.Latency.P50), ms(r.Latency.P90), ms(r.Latency.P99), ms(r.Latency.Max), nerr, r.Retries, cpu, cores, rss, bpe)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		var notes []string
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			notes = append(notes, fmt.Sprintf("errors %s: %d", k, r.Errors[k]))
		}
		for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
			notes = append(notes, fmt.Sprintf("%s: %s", k, num(r.Extra[k])))
		}
		if s := r.Server; s != nil && (s.WcharPerOp > 0 || s.WriteCallsPerOp > 0) {
			notes = append(notes, fmt.Sprintf("server writes per op: %s bytes to storage, %s bytes in %s write calls",
				num(s.WriteBytesPerOp), num(s.WcharPerOp), num(s.WriteCallsPerOp)))
		}
		if s := r.Server; s != nil && s.WALFramesPerOp > 0 {
			notes = append(notes, "WAL frames (pages written) per op: "+num(s.WALFramesPerOp))
		}
		if r.Server != nil && r.Server.CPUMicrosPerItem > 0 {
			notes = append(notes, "server µs per item: "+num(r.Server.CPUMicrosPerItem))
		}
		if r.ItemsPerOp > 0 {
			notes = append(notes, "items per op: "+num(r.ItemsPerOp))
		}
		if len(r.RunOpsPerSec) > 1 {
			var s []string
			for _, v := range r.RunOpsPerSec {
				s = append(s, num(v))
			}
			notes = append(notes, "ops/s by run: "+strings.Join(s, ", "))
		}
		if r.Error != "" {
			notes = append(notes, "FAILED: "+r.Error)
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "%s: %s\n", r.Workload, strings.Join(notes, "; "))
		}
	}
	return nil
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func ms(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}
