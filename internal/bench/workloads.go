package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
)

// workload is one named load.
type workload struct {
	name          string
	clients       int  // default number of clients
	fixedClients  bool // --clients does not apply
	accounts      int  // default number of accounts
	fixedAccounts bool // --accounts does not apply
	prefill       bool // uses --prefill
	defPrefill    int  // --prefill when not given
	// prefillRows: --prefill counts what the workload prepares itself over
	// HTTP (queued notices, grants), not chain events: no reuse of a saved
	// chain (--account-file).
	prefillRows bool
	// signsIn: the workload reads sign-in codes the server mails, so the
	// started server mails to the generator's SMTP sink.
	signsIn bool
	// ownServer: the workload starts the server it measures itself (not
	// auditchain serve), and needs no bench accounts.
	ownServer  bool
	serverArgs []string // serve flags the workload needs (before --server-arg)
	// prepServer, when set, runs before the generator starts serve (in its
	// scratch directory dir) and gives more serve flags and what to stop
	// after the server; such a workload needs a server the generator starts.
	prepServer func(ctx context.Context, e *env, dir string) (args []string, stop func() error, err error)
	openLoop   bool    // --rate applies
	defRate    float64 // --rate when not given (0: closed loop)
	keys       func(o *Options) int
	run        func(ctx context.Context, e *env, res Result) (Result, error)
	help       string
}

var workloads = []*workload{
	{name: "append", clients: 64, accounts: 100, openLoop: true, run: loadRun(appendSetup(false)),
		help: "unsigned appends; each client owns accounts and keeps their tips"},
	{name: "append-signed", clients: 64, accounts: 100, openLoop: true, run: loadRun(appendSetup(true)),
		help: "appends Ed25519-signed by a registered machine key"},
	{name: "sequential", clients: 1, fixedClients: true, accounts: 1, fixedAccounts: true, openLoop: true, prefill: true,
		run: loadRun(appendSetup(false)), help: "one client appending to one chain (of --prefill events, default 0)"},
	{name: "hot", clients: 64, accounts: 1, fixedAccounts: true, openLoop: true, prefill: true, run: loadRun(appendSetup(false)),
		help: "all clients on one account (of --prefill events, default 0), resyncing on 409 from expected_prev_hash/last_sequence"},
	{name: "batch", clients: 4, accounts: 100, openLoop: true, run: loadRun(batchSetup),
		help: "POST /v1/events/batch with --batch-size events per call, chains linked"},
	{name: "gate-status", clients: 64, accounts: 100, openLoop: true, run: loadRun(grantSetup(gateStatus)),
		help: "GET /v1/grants/status for a live grant"},
	{name: "grant-use", clients: 64, accounts: 100, openLoop: true, run: loadRun(grantSetup(grantUse)),
		help: "POST /v1/grants/{id}/use n=1 on a large budget"},
	{name: "tool-call", clients: 64, accounts: 100, openLoop: true, run: loadRun(grantSetup(toolCall)),
		help: "POST /v1/tool-calls for a live grant: the gate's check, one use and the tool_call event in one commit"},
	{name: "approved-call", clients: 64, accounts: 100, openLoop: true, prefill: true, defPrefill: 20000, prefillRows: true,
		run: runApprovedCall, help: "POST /v1/tool-calls of an approved call sent again with approval_id (its second pass: gate, the approval's use, one use, the tool_call), each approval held and approved by a second key before the run (open loop: rate × time; closed: --prefill, default 20000)"},
	{name: "approved-call-control", clients: 64, accounts: 100, openLoop: true, prefill: true, defPrefill: 20000, prefillRows: true,
		run: runApprovedCallControl, help: "approved-call's control: the same preparation, then plain allowed POST /v1/tool-calls (read_file, which no rule holds, a raw of the same shape) on the same accounts"},
	{name: "approvals-list", clients: 4, accounts: 1, fixedAccounts: true, openLoop: true, prefill: true, defPrefill: 10000, prefillRows: true,
		run: runApprovalsList, help: "GET /v1/approvals?status=pending on an account of --prefill pending approvals (default 10,000), each held through POST /v1/tool-calls"},
	{name: "mcp-gate", clients: 64, accounts: 100, openLoop: true, run: loadRun(grantSetup(mcpGate)),
		help: "the gate_check tool through POST /v1/mcp (a stateless JSON-RPC tools/call) for a live grant"},
	{name: "mcp-proxy", clients: 1, accounts: 1, fixedAccounts: true, run: runMCPProxy,
		help: "a tools/call through `auditchain mcp proxy`'s gate and record to an in-process upstream, against the same call direct: p50 overhead in extra"},
	{name: "otp-verify", clients: 64, accounts: 1, fixedAccounts: true, openLoop: true, defRate: 200, signsIn: true, run: loadRun(otpVerifySetup),
		help: "POST /v1/auth/otp/verify, each with a code prepared for its own account (open loop, --rate default 200)"},
	{name: "revoke", clients: 64, accounts: 100, openLoop: true, prefill: true, defPrefill: 20000, prefillRows: true,
		run: runRevoke, help: "POST /v1/grants/{id}/revoke, each of a distinct live grant prepared before the run (open loop: rate × time; closed: --prefill, default 20000)"},
	{name: "webhook-deliver", clients: 1, fixedClients: true, accounts: 20, prefill: true, defPrefill: 20000, prefillRows: true,
		serverArgs: webhookServerArgs, run: runWebhookDeliver,
		help: "--prefill webhook rows (default 20000) queued over --accounts (20), then drained by the cron route to a receiver in the generator: deliveries/s"},
	{name: "grant-expiry", clients: 1, fixedClients: true, accounts: 100, prefill: true, defPrefill: 100000, prefillRows: true,
		serverArgs: jobServerArgs, run: runGrantExpiry,
		help: "--prefill grants (default 100,000) all expiring within a day, then POST /v1/internal/cron/grant-expiry twice: the first run notifies every grant, the second none"},
	{name: "witness-sweep", clients: 1, fixedClients: true, accounts: 10000, prepServer: startSweepWitnesses, run: runWitnessSweep,
		help: "three `auditchain witness serve` (started by the generator) behind serve --witness; every account (--accounts, 10,000) gets events and a sealed block, then the next scheduled witness run (on the minute) is timed: accounts cosigned/s, against the 60 s budget"},
	{name: "search", clients: 16, accounts: 1, prefill: true, defPrefill: 100000, openLoop: true,
		run: loadRun(searchSetup), help: "POST /v1/events/search limit 200 on an account of --prefill events (other --accounts: --fill-others events each)"},
	{name: "heal-scan", clients: 1, accounts: 1, fixedAccounts: true, prefill: true, defPrefill: 100000, openLoop: true,
		run: loadRun(healSetup), help: "POST /v1/heal/scan over an account of --prefill events (--signed: signed events)"},
	{name: "restart", clients: 1, fixedClients: true, accounts: 1, fixedAccounts: true, prefill: true, defPrefill: 100000,
		run: runRestart, help: "stop and start the server --restarts times on --prefill events: time to /v1/health and to the first append"},
	{name: "listeners", clients: 1, fixedClients: true, accounts: 1, fixedAccounts: true,
		keys: func(o *Options) int { return (o.Listeners + streamsPerKey - 1) / streamsPerKey },
		run:  runListeners, help: "--listeners SSE streams; delivery latency of --events appends to all of them"},
	{name: "console", clients: 1, fixedClients: true, accounts: 1, fixedAccounts: true, prefill: true, defPrefill: 1000000,
		signsIn: true, run: runConsole,
		help: "every console page, signed in, on an account of --prefill events (default 1,000,000) and --grants grants (10,000): server time (Server-Timing) p50/p99 and bytes with assets per page; then --live of appends at --rate (200/s) with the activity stream open: RSS and heap"},
	{name: "hook", clients: 1, accounts: 1, openLoop: true, run: loadRun(hookSetup("PreToolUse")),
		help: "`auditchain hook --host claude-code` run as a process per PreToolUse call (process start, one POST /v1/tool-calls: gate, use, record); --hook-exe: the binary"},
	{name: "hook-result", clients: 1, accounts: 1, openLoop: true, run: loadRun(hookSetup("PostToolUse")),
		help: "`auditchain hook --host claude-code` run as a process per PostToolUse call (process start, one POST /v1/events/append: the tool_result); --hook-exe: the binary"},
	{name: "witness", clients: 64, accounts: 100, openLoop: true, ownServer: true, run: runWitness,
		help: "`auditchain witness serve` (started by the generator; --server-arg: its flags) cosigning --accounts account logs (at least --clients): each op a new checkpoint of one leaf more with its consistency proof, POST /add-checkpoint"},
}

func lookup(name string) *workload {
	for _, w := range workloads {
		if w.name == name {
			return w
		}
	}
	return nil
}

// WorkloadNames lists the workloads in order.
func WorkloadNames() []string {
	var out []string
	for _, w := range workloads {
		out = append(out, w.name)
	}
	return out
}

// WorkloadHelp is one line per workload for usage text.
func WorkloadHelp() string {
	var b bytes.Buffer
	for _, w := range workloads {
		fmt.Fprintf(&b, "  %-16s %s\n", w.name, w.help)
	}
	return b.String()
}

type setupFunc func(ctx context.Context, e *env) (func(w *worker) opFunc, error)

func loadRun(setup setupFunc) func(ctx context.Context, e *env, res Result) (Result, error) {
	return func(ctx context.Context, e *env, res Result) (Result, error) {
		mk, err := setup(ctx, e)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(e.progress, "bench: %s: %d clients, %s mode, %v\n", e.w.name, e.clients, res.Mode, e.o.Duration)
		lr := drive(ctx, e, mk, e.rate)
		lr.fill(&res)
		return res, nil
	}
}

// owned returns the accounts worker i drives: with at least as many accounts as
// clients each client owns every clients-th account (none shared); with fewer,
// clients share accounts round-robin.
func owned(e *env, i int) []int {
	n := len(e.accounts)
	if n >= e.clients {
		var out []int
		for a := i; a < n; a += e.clients {
			out = append(out, a)
		}
		return out
	}
	return []int{i % n}
}

// tip is a client's local view of one account's chain head.
type tip struct {
	seq  int64  // -1: empty chain
	hash []byte // nil: empty chain
	n    int64  // event ids issued on this account by this client
}

type chainState struct {
	accts []int
	tips  []tip
	next  int
	id    []byte
	hbuf  []byte
	sbuf  bytes.Buffer
}

func newChainState(e *env, i int) *chainState {
	s := &chainState{accts: owned(e, i)}
	s.tips = make([]tip, len(s.accts))
	for k := range s.tips {
		s.tips[k].seq = -1
	}
	return s
}

// pick returns the next account (round-robin) and its tip.
func (s *chainState) pick() (int, *tip) {
	k := s.next
	s.next = (s.next + 1) % len(s.accts)
	return s.accts[k], &s.tips[k]
}

const benchMachine = "bench-m"

// registerMachineKeys registers priv's public key for benchMachine on every account.
func registerMachineKeys(ctx context.Context, e *env, pub ed25519.PublicKey) error {
	body := []byte(`{"public_key":"` + base64.StdEncoding.EncodeToString(pub) + `"}`)
	var resp bytes.Buffer
	for _, a := range e.accounts {
		if _, err := e.c.do(ctx, "PUT", "/v1/machines/"+benchMachine+"/signing-key", a.key, body, &resp); err != nil {
			return fmt.Errorf("register signing key: %w", err)
		}
	}
	return nil
}

func appendSetup(signed bool) setupFunc {
	return func(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
		var priv ed25519.PrivateKey
		machine := ""
		if signed {
			pub, p, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return nil, err
			}
			priv, machine = p, benchMachine
			if err := registerMachineKeys(ctx, e, pub); err != nil {
				return nil, err
			}
		}
		if e.prefill > 0 {
			// The clients start from an empty tip: their first append on the
			// prefilled account answers 409 with the real tip (in the warmup).
			if err := prefill(ctx, e, 0, e.prefill, false); err != nil {
				return nil, err
			}
		}
		pool := newRawPool(priv)
		return func(w *worker) opFunc {
			s := newChainState(e, w.id)
			return func(ctx context.Context, w *worker) (int, error) {
				a, t := s.pick()
				return 1, appendOne(ctx, w, s, a, t, pool, machine)
			}
		}, nil
	}
}

var payloadHashKey = []byte(`"payload_hash":"`)

// appendOne appends one event to account a at the client's view of its tip,
// resyncing and retrying when another client moved the tip (409).
func appendOne(ctx context.Context, w *worker, s *chainState, a int, t *tip, pool *rawPool, machine string) error {
	e := w.e
	key := e.accounts[a].key
	for attempt := 0; ; attempt++ {
		k := int((t.n + int64(w.id)*31) % rawPoolSize)
		s.id = appendEventID(s.id[:0], e.prefix, w.id, t.n)
		t.n++
		spec := eventSpec{id: s.id, seq: t.seq + 1, prevHash: t.hash, raw: pool.raws[k], tool: "bash", decision: "allow", machine: machine}
		if pool.sigs != nil {
			spec.sig = pool.sigs[k]
		}
		w.body = appendCanonical(w.body[:0], &spec)
		_, err := w.target().do(ctx, "POST", "/v1/events", key, w.body, &w.resp)
		if err == nil {
			b := w.resp.Bytes()
			i := bytes.Index(b, payloadHashKey)
			if i < 0 {
				return errors.New("append answer without payload_hash")
			}
			b = b[i+len(payloadHashKey):]
			j := bytes.IndexByte(b, '"')
			if j < 0 {
				return errors.New("append answer: unterminated payload_hash")
			}
			t.hash = append(t.hash[:0], b[:j]...)
			t.seq = spec.seq
			e.stored.Add(1)
			return nil
		}
		var se *statusError
		if !errors.As(err, &se) || se.status != 409 || attempt >= 10000 || ctx.Err() != nil {
			if ab := notBuilt(err); ab != nil {
				return ab
			}
			return err
		}
		switch se.code {
		case "prev_hash_mismatch", "non_monotonic_sequence", "prev_hash_for_genesis":
		default:
			return err
		}
		w.retries++
		var p struct {
			Expected *string `json:"expected_prev_hash"`
			Last     *int64  `json:"last_sequence"`
		}
		_ = json.Unmarshal(w.resp.Bytes(), &p)
		if p.Expected != nil && p.Last != nil {
			t.hash = append(t.hash[:0], *p.Expected...)
			t.seq = *p.Last
			continue
		}
		if err := readTip(ctx, w, key, t, &s.sbuf); err != nil {
			return err
		}
	}
}

// readTip sets t from GET /v1/chain/tip.
func readTip(ctx context.Context, w *worker, key string, t *tip, buf *bytes.Buffer) error {
	if _, err := w.c.do(ctx, "GET", "/v1/chain/tip", key, nil, buf); err != nil {
		return err
	}
	var p struct {
		Sequence *int64  `json:"sequence"`
		Hash     *string `json:"payload_hash"`
	}
	if err := json.Unmarshal(buf.Bytes(), &p); err != nil {
		return fmt.Errorf("chain tip: %w", err)
	}
	if p.Sequence == nil || p.Hash == nil {
		t.seq, t.hash = -1, nil
		return nil
	}
	t.seq, t.hash = *p.Sequence, append(t.hash[:0], *p.Hash...)
	return nil
}

func searchSetup(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
	if err := prefill(ctx, e, 0, e.prefill, e.o.Signed); err != nil {
		return nil, err
	}
	// Three shapes: the newest page, a filtered page, and a page at a random
	// depth (cursor), so a flat p99 means the indexes work at every depth.
	bodies := [][]byte{[]byte(`{"limit":200}`), []byte(`{"limit":200,"decision":"deny"}`)}
	r := mrand.New(mrand.NewPCG(7, uint64(e.prefill)))
	for range 64 {
		c := 200 + r.IntN(max(e.prefill-200, 1))
		bodies = append(bodies, []byte(`{"limit":200,"cursor":`+strconv.Itoa(c)+`}`))
	}
	key := e.accounts[0].key
	return func(w *worker) opFunc {
		i := w.id
		return func(ctx context.Context, w *worker) (int, error) {
			var body []byte
			switch i % 4 {
			case 0:
				body = bodies[0]
			case 1:
				body = bodies[1]
			default:
				body = bodies[2+(i/4)%64]
			}
			i++
			_, err := w.c.do(ctx, "POST", "/v1/events/search", key, body, &w.resp)
			if ab := notBuilt(err); ab != nil {
				return 0, ab
			}
			return 1, err
		}
	}, nil
}

func healSetup(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
	if err := prefill(ctx, e, 0, e.prefill, e.o.Signed); err != nil {
		return nil, err
	}
	key := e.accounts[0].key
	body := []byte(`{}`)
	return func(w *worker) opFunc {
		return func(ctx context.Context, w *worker) (int, error) {
			_, err := w.c.do(ctx, "POST", "/v1/heal/scan", key, body, &w.resp)
			if err != nil {
				if ab := notBuilt(err); ab != nil {
					return 0, ab
				}
				return 0, err
			}
			var r struct {
				Total int  `json:"total_events"`
				Clean bool `json:"clean"`
			}
			if err := json.Unmarshal(w.resp.Bytes(), &r); err != nil {
				return 0, fmt.Errorf("scan answer: %w", err)
			}
			if !r.Clean {
				return 0, errors.New("scan reported the bench chain not clean")
			}
			return r.Total, nil
		}
	}, nil
}
