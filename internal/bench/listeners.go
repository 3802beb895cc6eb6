package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// streamsPerKey is the server's cap on concurrent streams per key
// (docs/decisions/stream.md); listeners spread over enough keys.
const streamsPerKey = 16

// runListeners opens --listeners SSE streams on one account, waits until each
// has said ready, then appends --events events (one every 1/--rate s, default
// 20/s) and measures, per event and listener, the time from just before the
// append was sent to the frame's arrival. The server's RSS is sampled idle
// and with every stream open.
func runListeners(ctx context.Context, e *env, res Result) (Result, error) {
	o := e.o
	acct := e.accounts[0]
	res.Clients = o.Listeners
	res.Mode, res.Rate = "open", o.Rate
	if res.Rate <= 0 {
		res.Rate = 20
	}
	res.Extra = map[string]float64{"listeners": float64(o.Listeners)}
	if e.serverPID > 0 {
		if s, err := sampleProc(e.serverPID); err == nil {
			res.Extra["server_rss_mb_idle"] = float64(s.rssKB) / 1024
		}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true, ReadBufferSize: 4 << 10, WriteBufferSize: 4 << 10}
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()

	n := o.Events
	sent := make([]atomic.Int64, n) // unix ns just before each append went out
	got := make([]atomic.Int32, n)  // listeners that received each event
	var (
		hmu      [16]sync.Mutex
		hists    [16]Histogram
		allMu    sync.Mutex
		allHist  Histogram
		streamEr sync.Map // error key → *atomic.Int64
	)
	countErr := func(k string) {
		v, _ := streamEr.LoadOrStore(k, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	var ready sync.WaitGroup
	ready.Add(o.Listeners)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // connections being opened at once
	prefix := []byte("evt-" + e.prefix + "-")
	start := time.Now()
	for i := range o.Listeners {
		key := acct.keys[i/streamsPerKey]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			signalled := false
			signal := func() {
				if !signalled {
					signalled = true
					ready.Done()
					<-sem
				}
			}
			defer signal()
			req, _ := http.NewRequestWithContext(sctx, "GET", e.c.base+"/v1/events/stream", nil)
			req.Header.Set("X-API-Key", key)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := hc.Do(req)
			if err != nil {
				if sctx.Err() == nil {
					countErr("connect: transport")
				}
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				countErr("connect: " + strconv.Itoa(resp.StatusCode))
				return
			}
			br := bufio.NewReaderSize(resp.Body, 2048)
			var event []byte
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					if sctx.Err() == nil {
						countErr("stream ended")
					}
					return
				}
				line = bytes.TrimRight(line, "\r\n")
				switch {
				case bytes.HasPrefix(line, []byte("event: ")):
					event = append(event[:0], line[7:]...)
					if string(event) == "ready" {
						signal()
					} else if string(event) == "lagged" {
						countErr("lagged")
					}
				case bytes.HasPrefix(line, []byte("data: ")) && string(event) == "event":
					now := time.Now().UnixNano()
					idx := eventIndex(line, prefix)
					if idx < 0 || idx >= n {
						continue
					}
					if t := sent[idx].Load(); t > 0 {
						h := i % len(hists)
						hmu[h].Lock()
						hists[h].Record(time.Duration(now - t))
						hmu[h].Unlock()
						if int(got[idx].Add(1)) == o.Listeners {
							allMu.Lock()
							allHist.Record(time.Duration(now - t))
							allMu.Unlock()
						}
					}
				}
			}
		}()
	}
	waitCh := make(chan struct{})
	go func() { ready.Wait(); close(waitCh) }()
	select {
	case <-waitCh:
	case <-time.After(2 * time.Minute):
		return res, errors.New("listeners: streams not ready within 2 minutes")
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.Extra["connect_seconds"] = time.Since(start).Seconds()
	time.Sleep(500 * time.Millisecond) // let the server settle
	var cpuFrom procSample
	if e.serverPID > 0 {
		if s, err := sampleProc(e.serverPID); err == nil {
			res.Extra["server_rss_mb_listening"] = float64(s.rssKB) / 1024
			cpuFrom = s
		}
	}
	fmt.Fprintf(e.progress, "bench: %d listeners ready in %.1fs; appending %d events\n", o.Listeners, time.Since(start).Seconds(), n)

	rate := res.Rate
	pool := newRawPool(nil)
	// With several targets the appends go to the last one and the streams are
	// on the first: delivery then crosses replicas.
	w := &worker{id: 0, e: e, c: e.cs[len(e.cs)-1], errs: map[string]int64{}}
	s := &chainState{accts: []int{0}, tips: []tip{{seq: -1}}}
	sched := newSchedule(time.Now(), rate)
	var appendHist Histogram
	t0 := time.Now()
	var appended int64
	for i := range n {
		due := sched.at(int64(i))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		// The event id's counter is i: listeners map frames back to sent[i].
		s.tips[0].n = int64(i)
		sent[i].Store(time.Now().UnixNano())
		if err := appendOne(ctx, w, s, 0, &s.tips[0], pool, ""); err != nil {
			w.countErr(err)
			sent[i].Store(0)
			continue
		}
		appended++
		appendHist.Record(time.Since(due))
	}
	// Wait for the last deliveries.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		complete := true
		for i := range n {
			if sent[i].Load() > 0 && int(got[i].Load()) < o.Listeners {
				complete = false
				break
			}
		}
		if complete {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(t0)
	var all Histogram
	for i := range hists {
		hmu[i].Lock()
		all.Merge(&hists[i])
		hmu[i].Unlock()
	}
	var missing int64
	for i := range n {
		if sent[i].Load() > 0 {
			missing += int64(o.Listeners) - int64(got[i].Load())
		}
	}
	res.Seconds = elapsed.Seconds()
	res.Ops = appended
	res.OpsPerSec = float64(appended) / elapsed.Seconds()
	res.ItemsPerOp = float64(all.Count()) / float64(max(appended, 1))
	res.ItemsPerSec = float64(all.Count()) / elapsed.Seconds()
	res.Latency = latencyOf(&all)
	allMu.Lock()
	res.Extra["all_delivered_p50_ms"] = latencyOf(&allHist).P50
	res.Extra["all_delivered_p99_ms"] = latencyOf(&allHist).P99
	allMu.Unlock()
	res.Extra["append_p50_ms"] = latencyOf(&appendHist).P50
	res.Errors = w.errs
	if missing > 0 {
		res.Errors["undelivered"] = missing
	}
	streamEr.Range(func(k, v any) bool {
		res.Errors[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	if len(res.Errors) == 0 {
		res.Errors = nil
	}
	if e.serverPID > 0 {
		if s, err := sampleProc(e.serverPID); err == nil {
			cpu := s.cpu - cpuFrom.cpu
			res.Server = &ServerStats{PeakRSSMB: float64(s.hwmKB) / 1024, RSSMB: float64(s.rssKB) / 1024,
				CPUCores: cpu.Seconds() / elapsed.Seconds()}
			if appended > 0 {
				res.Server.CPUMicrosPerOp = float64(cpu.Microseconds()) / float64(appended)
				if all.Count() > 0 {
					res.Server.CPUMicrosPerItem = float64(cpu.Microseconds()) / float64(all.Count())
				}
			}
		}
	}
	cancel()
	wg.Wait()
	return res, nil
}

// eventIndex finds `"event_id":"evt-<prefix>-<worker>-<n>"` in an SSE data
// line and returns n, or -1.
func eventIndex(line, prefix []byte) int {
	i := bytes.Index(line, []byte(`"event_id":"`))
	if i < 0 {
		return -1
	}
	id := line[i+len(`"event_id":"`):]
	if !bytes.HasPrefix(id, prefix) {
		return -1
	}
	if j := bytes.IndexByte(id, '"'); j >= 0 {
		id = id[:j]
	}
	k := bytes.LastIndexByte(id, '-')
	n, err := strconv.Atoi(string(id[k+1:]))
	if err != nil {
		return -1
	}
	return n
}
