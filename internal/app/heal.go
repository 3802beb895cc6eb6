package app

// Chain heal (SPEC.md "Chain heal", "Heal records", "Periodic heal task";
// docs/decisions/heal.md): a scan that streams the account's chain in
// sequence order with constant memory and reports breaks, gaps, signature
// failures and whether the Merkle root recomputed from the events matches the
// stored tree and the newest signed block; a run that appends one chain_repair
// event per new finding through the single append path; the per-process
// status cache; and the periodic scan task.

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/schedule"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// EventChainRepair is the type of the events a heal run appends.
const EventChainRepair = "chain_repair"

// Finding kinds, as chain_repair events and run actions name them.
const (
	FindingBreak     = "break"
	FindingGap       = "gap"
	FindingSignature = "signature_failure"
)

// Merkle root statuses of a scan.
const (
	RootOK       = "ok"
	RootMismatch = "mismatch"
)

// ScanResult is SPEC.md's Scan result.
type ScanResult struct {
	Breaks            []verify.Break             `json:"breaks"`
	Gaps              []verify.Gap               `json:"gaps"`
	SignatureFailures []api.HealSignatureFailure `json:"signature_failures"`
	MerkleRootStatus  string                     `json:"merkle_root_status"`
	// MerkleRootDetail says why the root reads mismatch (null when ok).
	MerkleRootDetail *string `json:"merkle_root_detail"`
	Clean            bool    `json:"clean"`
	// TotalEvents counts the events in scope (the machine's when filtered);
	// Verified those of them with no finding.
	TotalEvents int64   `json:"total_events"`
	Verified    int64   `json:"verified"`
	ScannedAt   string  `json:"scanned_at"`
	MachineID   *string `json:"machine_id"`
	UserID      string  `json:"user_id"`
}

// finding is one break, gap or signature failure with its stable key.
type finding struct {
	kind     string
	key      string
	sequence int64 // the event the finding is attached to (sorting)
	detail   any   // verify.Break, verify.Gap or api.HealSignatureFailure
}

func breakKey(b verify.Break) string {
	return fmt.Sprintf("break:%d:%s:%s:%s", b.Sequence, b.EventID, strOrNull(b.ExpectedPrevHash), strOrNull(b.FoundPrevHash))
}

func gapKey(g verify.Gap) string {
	after := "null"
	if g.AfterSequence != nil {
		after = fmt.Sprint(*g.AfterSequence)
	}
	return fmt.Sprintf("gap:%s:%d:%d", after, g.MissingFrom, g.MissingTo)
}

func signatureKey(f api.HealSignatureFailure, payloadHash string) string {
	return fmt.Sprintf("signature_failure:%d:%s:%s", f.Sequence, f.EventID, payloadHash)
}

func strOrNull(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// HealScan answers POST /v1/heal/scan. It writes nothing.
func (a *App) HealScan(ctx context.Context, p Principal, machineID *string) (ScanResult, error) {
	res, _, err := a.scan(ctx, p.UserID, machineID)
	if err != nil {
		return ScanResult{}, err
	}
	a.heal.setScan(p.UserID, res)
	return res, nil
}

// keyRing answers which of a machine's keys is in force at a leaf.
type keyRing map[string][]ringKey

type ringKey struct {
	fromLeaf int64
	pub      ed25519.PublicKey // nil: the stored key does not parse (every signature fails)
}

func (r keyRing) at(machine string, leaf int64) (ringKey, bool) {
	ks := r[machine]
	i, _ := slices.BinarySearchFunc(ks, leaf+1, func(k ringKey, t int64) int {
		switch {
		case k.fromLeaf < t:
			return -1
		case k.fromLeaf > t:
			return 1
		}
		return 0
	})
	if i == 0 {
		return ringKey{}, false
	}
	return ks[i-1], true
}

// signedEvent is what the scan reports of an event whose signature fails.
type signedEvent struct {
	sequence  int64
	eventID   string
	machineID string
	payload   string // payload_hash, part of the finding key
	counted   bool   // the event already has a break or gap
}

// scan streams the chain once. The snapshot is the head read after the newest
// block: every event with sequence ≤ the head's, the stored tree of the head's
// size, and a block never larger than that.
func (a *App) scan(ctx context.Context, userID string, machineID *string) (ScanResult, []finding, error) {
	if machineID != nil && *machineID == "" {
		return ScanResult{}, nil, domain.Validation(domain.FieldError{Field: "machine_id", Message: "must not be empty; null scans every machine"})
	}
	res := ScanResult{Breaks: []verify.Break{}, Gaps: []verify.Gap{}, SignatureFailures: []api.HealSignatureFailure{}, MerkleRootStatus: RootOK,
		MachineID: machineID, UserID: userID}
	block, err := a.Store.LastBlock(ctx, nil, userID)
	hasBlock := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return res, nil, err
	}
	head, err := a.Store.Head(ctx, userID)
	if err != nil {
		return res, nil, err
	}
	rootDetail := ""
	mismatch := func(format string, args ...any) {
		if rootDetail == "" {
			rootDetail = fmt.Sprintf(format, args...)
		}
	}
	// The newest block must be the service's, for this account; its root is
	// compared with the events' root at its size while streaming.
	var blockSize uint64
	var blockRoot verify.Hash
	if hasBlock {
		bv, err := verify.NewBlockVerifier(verify.Origin(userID), a.ServicePublicKey())
		if err != nil {
			return res, nil, err
		}
		if cp, err := bv.Next(block.Index, block.Note); err != nil {
			mismatch("the newest block %d does not verify: %v", block.Index, err)
		} else {
			blockSize, blockRoot = cp.Size, cp.Root
		}
	}

	stored, err := a.Store.SigningKeys(ctx, userID)
	if err != nil {
		return res, nil, err
	}
	ring := keyRing{}
	for _, k := range stored { // ordered by from_leaf
		pub, _ := verify.ParsePublicKey(k.PublicKey)
		ring[k.MachineID] = append(ring[k.MachineID], ringKey{fromLeaf: k.FromLeaf, pub: pub})
	}

	var findings []finding
	var flagged int64 // events in scope with a finding
	inScope := func(e *store.Event) bool {
		return machineID == nil || (e.MachineID != nil && *e.MachineID == *machineID)
	}

	// Signatures are verified by a pool, so a signed chain scans on every
	// core. Failures come back in the order the workers found them; the scan
	// sorts every finding by sequence (unique per account) at the end.
	var sigs *verify.SignatureChecks[signedEvent]
	var sigMu sync.Mutex
	var sigFailed []signedEvent // complete once stopSigs returned
	stopSigs := func() {
		if sigs != nil {
			sigs.Close()
			sigs = nil
		}
	}
	if len(ring) > 0 {
		workers := runtime.GOMAXPROCS(0)
		sigs = verify.NewSignatureChecks(workers, func(e signedEvent) {
			sigMu.Lock()
			sigFailed = append(sigFailed, e)
			sigMu.Unlock()
		})
		sigs.Start(workers)
		defer stopSigs()
	}

	// The Merkle root is recomputed while streaming, in sequence order,
	// which is leaf order unless a batch stored rows below the tip; then a
	// second pass reads the events in leaf order for the root (leafOrderRoot).
	frontier, _ := verify.NewFrontier(0, nil)
	inLeafOrder := true
	tipLeaf := int64(-1) // the leaf of the last event stored at the tip
	var (
		pos      int64
		prevSeq  int64
		prevHash string
		scratch  []byte
		want     [len(verify.HashPrefix) + 64]byte
	)
	copy(want[:], verify.HashPrefix)
	err = a.Store.EventsBySequence(ctx, userID, head.LastSequence, func(e *store.Event) error {
		scope := inScope(e)
		counted := false
		add := func(f finding) {
			if scope {
				findings = append(findings, f)
				if !counted {
					counted = true
					flagged++
				}
			}
		}
		if scope {
			res.TotalEvents++
		}
		// Continuity. A link is judged only between adjacent sequence
		// numbers: across a hole the previous event is missing, and the
		// hole itself is the finding.
		switch {
		case pos == 0 && e.Sequence > 0:
			g := verify.Gap{MissingFrom: 0, MissingTo: e.Sequence - 1}
			add(finding{kind: FindingGap, key: gapKey(g), sequence: e.Sequence, detail: g})
		case pos == 0:
			if e.PrevHash != nil {
				b := verify.Break{Sequence: e.Sequence, EventID: e.EventID, FoundPrevHash: e.PrevHash}
				add(finding{kind: FindingBreak, key: breakKey(b), sequence: e.Sequence, detail: b})
			}
		case e.Sequence > prevSeq+1:
			after := prevSeq
			g := verify.Gap{AfterSequence: &after, MissingFrom: prevSeq + 1, MissingTo: e.Sequence - 1}
			add(finding{kind: FindingGap, key: gapKey(g), sequence: e.Sequence, detail: g})
		case e.PrevHash == nil || *e.PrevHash != prevHash:
			expected := prevHash
			b := verify.Break{Sequence: e.Sequence, EventID: e.EventID, ExpectedPrevHash: &expected, FoundPrevHash: e.PrevHash}
			add(finding{kind: FindingBreak, key: breakKey(b), sequence: e.Sequence, detail: b})
		}
		// Signature against the machine's key in force at the event's leaf.
		if e.MachineID != nil && sigs != nil {
			if k, ok := ring.at(*e.MachineID, e.LeafIndex); ok {
				if e.Signature == nil {
					f := api.HealSignatureFailure{Sequence: e.Sequence, EventID: e.EventID, MachineID: *e.MachineID, Reason: "missing"}
					add(finding{kind: FindingSignature, key: signatureKey(f, e.PayloadHash), sequence: e.Sequence, detail: f})
				} else if scope { // findings outside the machine filter are not reported
					sigs.Submit(k.pub, e.Raw, *e.Signature, signedEvent{sequence: e.Sequence, eventID: e.EventID,
						machineID: *e.MachineID, payload: e.PayloadHash, counted: counted})
				}
			}
		}
		// The Merkle leaf: the payload_hash recomputed from the stored fields.
		var h verify.Hash
		var herr error
		scratch, h, herr = verify.EventHash(hashedOf(e), scratch)
		hex.Encode(want[len(verify.HashPrefix):], h[:])
		switch {
		case herr != nil:
			mismatch("the event at sequence %d cannot be canonicalised: %v", e.Sequence, herr)
		case string(want[:]) != e.PayloadHash:
			mismatch("the event at sequence %d does not hash to its stored payload_hash", e.Sequence)
		case !e.BelowTip && e.LeafIndex <= tipLeaf:
			// Events stored at the tip take leaves in sequence order (the
			// leaf-order reads rely on it); only a row a batch stored below
			// the tip may sit at a later leaf than a higher sequence.
			mismatch("the event at sequence %d is stored at leaf %d, before the leaf %d of a lower sequence stored at the tip",
				e.Sequence, e.LeafIndex, tipLeaf)
		case e.LeafIndex != pos:
			inLeafOrder = false
		}
		if !e.BelowTip {
			tipLeaf = max(tipLeaf, e.LeafIndex)
		}
		frontier.Append(verify.LeafHash(h[:]))
		pos++
		if inLeafOrder && blockSize > 0 && frontier.Size() == blockSize && frontier.Root() != blockRoot {
			mismatch("the newest block signs root %s at size %d; the events give %s", blockRoot, blockSize, frontier.Root())
		}
		prevSeq, prevHash = e.Sequence, e.PayloadHash
		return nil
	})
	stopSigs()
	if err != nil {
		return res, nil, err
	}
	if !inLeafOrder {
		if frontier, err = a.leafOrderRoot(ctx, userID, head.EventCount, blockSize, blockRoot, mismatch); err != nil {
			return res, nil, err
		}
	}

	// The whole tree: as many events as the head counts, and the stored
	// tree's root equal to the events' root.
	switch {
	case pos != head.EventCount:
		mismatch("the chain head counts %d events; %d are stored up to its sequence", head.EventCount, pos)
	case blockSize > uint64(pos):
		mismatch("the newest block covers %d events; %d are stored", blockSize, pos)
	default:
		// The root reads only hashes below the tree's size: hashes stored
		// past it (written behind the store's back) show in where it ends.
		end, err := a.Store.StoredTreeEnd(ctx, userID)
		if err != nil {
			return res, nil, err
		}
		if want := merkle.StoredHashCount(head.EventCount); end > want {
			mismatch("the stored Merkle tree holds hashes up to index %d, past the %d of its %d leaves", end-1, want, head.EventCount)
			break
		}
		if pos == 0 {
			break
		}
		root, err := merkle.Root(head.EventCount, a.Store.HashReader(ctx, nil, userID))
		switch {
		case errors.Is(err, store.ErrMissingHash) || errors.Is(err, store.ErrMalformedHash):
			mismatch("the stored Merkle tree is incomplete or malformed: %v", err)
		case err != nil:
			return res, nil, err
		case root != frontier.Root():
			mismatch("the stored tree's root %s differs from the events' root %s", root, frontier.Root())
		}
	}

	for _, j := range sigFailed {
		f := api.HealSignatureFailure{Sequence: j.sequence, EventID: j.eventID, MachineID: j.machineID, Reason: "invalid"}
		findings = append(findings, finding{kind: FindingSignature, key: signatureKey(f, j.payload), sequence: f.Sequence, detail: f})
		if !j.counted {
			flagged++
		}
	}
	slices.SortStableFunc(findings, func(x, y finding) int {
		if x.sequence != y.sequence {
			return cmp.Compare(x.sequence, y.sequence)
		}
		return cmp.Compare(kindOrder(x.kind), kindOrder(y.kind))
	})
	for _, f := range findings {
		switch d := f.detail.(type) {
		case verify.Break:
			res.Breaks = append(res.Breaks, d)
		case verify.Gap:
			res.Gaps = append(res.Gaps, d)
		case api.HealSignatureFailure:
			res.SignatureFailures = append(res.SignatureFailures, d)
		}
	}
	if rootDetail != "" {
		res.MerkleRootStatus, res.MerkleRootDetail = RootMismatch, &rootDetail
	}
	res.Verified = res.TotalEvents - flagged
	res.Clean = len(findings) == 0 && res.MerkleRootStatus == RootOK
	res.ScannedAt = domain.FormatTimestamp(a.Now())
	return res, findings, nil
}

// leafOrderRoot is the events' tree in leaf order, for a chain whose leaf
// order is not its sequence order (rows a batch stored below the tip): it
// reads the first n leaves' events in leaf order, checking that each sits at
// its stored leaf position, and the newest block's root at its size.
func (a *App) leafOrderRoot(ctx context.Context, userID string, n int64, blockSize uint64, blockRoot verify.Hash,
	mismatch func(string, ...any)) (*verify.Frontier, error) {
	frontier, _ := verify.NewFrontier(0, nil)
	errStop := errors.New("stop")
	err := a.Store.EventsFrom(ctx, userID, 0, func(e *store.Event) error {
		if int64(frontier.Size()) == n {
			return errStop
		}
		if e.LeafIndex != int64(frontier.Size()) {
			mismatch("the event at sequence %d is stored at leaf %d; in leaf order it is leaf %d", e.Sequence, e.LeafIndex, frontier.Size())
		}
		h, err := verify.HashBytes(e.PayloadHash)
		if err != nil {
			mismatch("the event at sequence %d has a malformed payload_hash", e.Sequence)
			return errStop
		}
		frontier.Append(verify.LeafHash(h))
		if blockSize > 0 && frontier.Size() == blockSize && frontier.Root() != blockRoot {
			mismatch("the newest block signs root %s at size %d; the events give %s", blockRoot, blockSize, frontier.Root())
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return frontier, nil
}

func kindOrder(k string) int64 {
	switch k {
	case FindingGap:
		return 0
	case FindingBreak:
		return 1
	}
	return 2
}

// findingJSON is a finding (verify.Break, verify.Gap or api.HealSignatureFailure:
// plain fields that always encode) as an api.HealRepairAction carries it.
func findingJSON(detail any) json.RawMessage {
	b, err := json.Marshal(detail)
	if err != nil {
		panic(fmt.Sprintf("heal: encode a finding: %v", err))
	}
	return b
}

// repairRaw is the raw of a chain_repair event: the finding it answers, by
// its stable key and its fields. The original event is never touched.
func repairRaw(f finding, detectedAt string) map[string]any {
	return map[string]any{"finding_key": f.key, "kind": f.kind, "finding": f.detail, "detected_at": detectedAt,
		"note": "appended by heal run; the original events are unchanged"}
}

// HealRun answers POST /v1/heal/run: the scan's findings, and unless dryRun
// one chain_repair event per finding no earlier run answered, appended at the
// tip under the account's head lock. heal_repairs is read and written in the
// same transaction, so two runs (two replicas) never write the same repair.
func (a *App) HealRun(ctx context.Context, p Principal, dryRun bool, machineID *string) (api.HealRun, error) {
	scan, findings, err := a.scan(ctx, p.UserID, machineID)
	if err != nil {
		return api.HealRun{}, err
	}
	a.heal.setScan(p.UserID, scan)
	res := api.HealRun{Breaks: len(scan.Breaks), Gaps: len(scan.Gaps), SignatureFailures: len(scan.SignatureFailures),
		DryRun: dryRun, MachineID: machineID, MerkleRootStatus: scan.MerkleRootStatus, UserID: p.UserID}
	if dryRun {
		res.Actions = make([]api.HealRepairAction, 0, len(findings))
		for _, f := range findings {
			act := api.HealRepairAction{Kind: f.kind, FindingKey: f.key, Finding: findingJSON(f.detail), Status: "would_write"}
			switch r, err := a.Store.HealRepairByKey(ctx, nil, p.UserID, f.key); {
			case err == nil:
				act.Status, act.RepairEventID, act.RepairSequence = "skipped", &r.RepairEventID, &r.RepairSequence
				res.Skipped++
			case errors.Is(err, store.ErrNotFound):
				res.WouldWrite++
			default:
				return api.HealRun{}, err
			}
			res.Actions = append(res.Actions, act)
		}
	} else {
		err = a.w.Write(ctx, func(t *writer.Tx) error {
			res.Actions, res.Skipped, res.Written = make([]api.HealRepairAction, 0, len(findings)), 0, 0
			if _, err := t.Lock(ctx, p.UserID); err != nil {
				return err
			}
			now := a.Now()
			for _, f := range findings {
				act := api.HealRepairAction{Kind: f.kind, FindingKey: f.key, Finding: findingJSON(f.detail)}
				switch r, err := a.Store.HealRepairByKey(ctx, t.SQL(), p.UserID, f.key); {
				case err == nil:
					act.Status, act.RepairEventID, act.RepairSequence = "skipped", &r.RepairEventID, &r.RepairSequence
					res.Skipped++
					res.Actions = append(res.Actions, act)
					continue
				case !errors.Is(err, store.ErrNotFound):
					return err
				}
				ev, err := a.appendServerEvent(ctx, t, p, ServerEvent{EventType: EventChainRepair, Raw: repairRaw(f, scan.ScannedAt)})
				if err != nil {
					return err
				}
				if err := a.Store.InsertHealRepair(ctx, t.SQL(), store.HealRepair{UserID: p.UserID, FindingKey: f.key, Kind: f.kind,
					RepairEventID: ev.EventID, RepairSequence: ev.Sequence, CreatedAt: now.UnixMicro()}); err != nil {
					return err
				}
				id, seq := ev.EventID, ev.Sequence
				act.Status, act.RepairEventID, act.RepairSequence = "written", &id, &seq
				res.Written++
				res.Actions = append(res.Actions, act)
			}
			if res.Written == 0 {
				return nil
			}
			_, err := a.notify(ctx, t, p.UserID, Notice{Type: domain.NoticeChainRepairRun,
				Subject: map[string]any{"repairs_written": res.Written, "breaks": res.Breaks, "gaps": res.Gaps}})
			return err
		})
		if errors.Is(err, store.ErrConflict) {
			// A run on another replica got past the lock check at the same
			// time (cannot happen under the head lock; the key is the backstop).
			return api.HealRun{}, &domain.Error{Code: CodeHealConflict,
				Detail: "another heal run recorded the same repair concurrently; run again to see it skipped"}
		}
		if err != nil {
			return api.HealRun{}, err
		}
	}
	res.CompletedAt = domain.FormatTimestamp(a.Now())
	a.heal.setRun(p.UserID, res)
	return res, nil
}

// CodeHealConflict answers a heal run that lost a race it should not be able
// to lose (the unique key caught a double write).
const CodeHealConflict = "heal_conflict"

// HealStatus is the answer of GET /v1/heal/status.
type HealStatus struct {
	AutoRunning bool         `json:"auto_running"`
	LastScan    *ScanResult  `json:"last_scan"`
	LastRepair  *api.HealRun `json:"last_repair"`
}

// HealStatus answers GET /v1/heal/status from this process's cache (SPEC.md:
// per account and per process).
func (a *App) HealStatus(p Principal) HealStatus {
	return a.heal.status(p.UserID)
}

// Periodic task bounds (docs/decisions/heal.md).
const (
	DefaultHealPeriod = 300
	MinHealPeriod     = 60
	MaxHealPeriod     = 86400
)

// HealAutoStart answers POST /v1/heal/auto/start. A running task with the
// same period is answered as it is (start is idempotent); with another
// period it is replaced by a new task (new task_id and started_at).
func (a *App) HealAutoStart(ctx context.Context, p Principal, period int) (api.HealAutoTask, error) {
	if period < MinHealPeriod || period > MaxHealPeriod {
		return api.HealAutoTask{}, domain.Validation(domain.FieldError{Field: "period_seconds",
			Message: fmt.Sprintf("must be between %d and %d seconds", MinHealPeriod, MaxHealPeriod)})
	}
	id, err := a.newID("heal-", 8)
	if err != nil {
		return api.HealAutoTask{}, err
	}
	return a.heal.start(a, p.UserID, id, period), nil
}

// HealAutoStop answers POST /v1/heal/auto/stop; stopping a task that is not
// running answers stopped false and is not an error.
func (a *App) HealAutoStop(p Principal) api.HealAutoStop {
	return a.heal.stop(p.UserID, domain.FormatTimestamp(a.Now()))
}

// healState is the per-process heal cache and the running tasks.
type healState struct {
	mu    sync.Mutex
	users map[string]*healUser
	// closed is set by Close: no task starts afterwards.
	closed bool
}

type healUser struct {
	lastScan *ScanResult
	lastRun  *api.HealRun
	task     *autoTask
}

type autoTask struct {
	id        string
	period    int
	startedAt string
	started   time.Time
	cancel    context.CancelFunc
	done      chan struct{}
}

func (h *healState) user(id string) *healUser {
	if h.users == nil {
		h.users = map[string]*healUser{}
	}
	u := h.users[id]
	if u == nil {
		u = &healUser{}
		h.users[id] = u
	}
	return u
}

func (h *healState) setScan(userID string, r ScanResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.user(userID).lastScan = &r
}

func (h *healState) setRun(userID string, r api.HealRun) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.user(userID).lastRun = &r
}

func (h *healState) status(userID string) HealStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	u := h.user(userID)
	return HealStatus{AutoRunning: u.task != nil, LastScan: u.lastScan, LastRepair: u.lastRun}
}

func (t *autoTask) view(userID string) api.HealAutoTask {
	id, started := t.id, t.startedAt
	return api.HealAutoTask{PeriodSeconds: t.period, Running: true, StartedAt: &started, TaskID: &id, UserID: userID}
}

func (h *healState) start(a *App, userID, id string, period int) api.HealAutoTask {
	h.mu.Lock()
	u := h.user(userID)
	old := u.task
	if old != nil && old.period == period {
		h.mu.Unlock()
		return old.view(userID)
	}
	if h.closed {
		h.mu.Unlock()
		return api.HealAutoTask{PeriodSeconds: period, UserID: userID}
	}
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now() // the task's periods count on the runtime's timers (schedule.Loop)
	t := &autoTask{id: id, period: period, startedAt: domain.FormatTimestamp(a.Now()), started: now, cancel: cancel, done: make(chan struct{})}
	u.task = t
	h.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	go a.runAutoTask(ctx, t, userID)
	return t.view(userID)
}

// runAutoTask scans once per period until cancelled, on the scheduler's
// wait loop (schedule.Loop: every period from the start, a slow scan skips
// the periods it overran). It only scans (writes nothing): repairs stay an
// explicit POST /v1/heal/run. The task is per process (SPEC.md "Chain heal"):
// no lease, and it ends with the process.
func (a *App) runAutoTask(ctx context.Context, t *autoTask, userID string) {
	defer close(t.done)
	schedule.Loop(ctx, schedule.EveryFrom(t.started, time.Duration(t.period)*time.Second), nil, func(ctx context.Context, _ time.Time) {
		res, _, err := a.scan(ctx, userID, nil)
		if err != nil {
			if ctx.Err() == nil {
				a.Log.Warn("periodic heal scan failed", "user_id", userID, "task_id", t.id, "err", err)
			}
			return
		}
		a.heal.setScan(userID, res)
	})
}

func (h *healState) stop(userID, now string) api.HealAutoStop {
	h.mu.Lock()
	u := h.user(userID)
	t := u.task
	u.task = nil
	h.mu.Unlock()
	if t == nil {
		return api.HealAutoStop{UserID: userID}
	}
	t.cancel()
	<-t.done
	id, started := t.id, t.startedAt
	return api.HealAutoStop{Running: false, StartedAt: &started, Stopped: true, StoppedAt: &now, TaskID: &id, UserID: userID}
}

// StopHealTasks ends every periodic heal task of this process; none starts
// afterwards. Close calls it on shutdown.
func (a *App) StopHealTasks() { a.heal.stopAll() }

// stopAll ends every task (shutdown); none starts afterwards.
func (h *healState) stopAll() {
	h.mu.Lock()
	h.closed = true
	var tasks []*autoTask
	for _, u := range h.users {
		if u.task != nil {
			tasks = append(tasks, u.task)
			u.task = nil
		}
	}
	h.mu.Unlock()
	for _, t := range tasks {
		t.cancel()
		<-t.done
	}
}
