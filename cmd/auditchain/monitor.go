package main

// `auditchain monitor`: holds an account's log to the checkpoint it pinned
// (internal/monitor, docs/integrity.md "Monitor"). `chain verify --pin` is
// the same check once.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/monitor"
	notifywebhook "github.com/auditchain/auditchain/internal/notify/webhook"
	"github.com/auditchain/auditchain/pkg/client"
)

// exitAlarm is the exit code of a monitor check that found the log not
// holding to its pin (a split view, a rollback, a bad signature): the
// evidence is on stdout (docs/cli.md).
const exitAlarm = 4

// alarmError ends a check that raised an alarm; the evidence is printed.
type alarmError struct{ a *monitor.Alarm }

func (e alarmError) Error() string {
	return "ALARM " + e.a.Error() + " (the evidence, both checkpoints in full, is on stdout)"
}

const monitorUsage = `usage: auditchain monitor --account USER_ID --state FILE [--url URL] [--api-key KEY]
                         [--service-key KEY] [--witness VKEY ... [--quorum N]]
                         [--interval D] [--once] [--webhook URL [--webhook-secret whsec_...]]
                         [--json]

Polls the account's newest signed checkpoint and holds it to the one pinned
in the state FILE: it must be signed by the pinned service key, and the
service must prove (a consistency proof, checked here) that the pinned tree
is a prefix of the new one. Consistent growth moves the pin forward (with
--witness, only to a checkpoint carrying --quorum of their cosignatures: the
newest, else the newest of the 16 blocks before it that carries them).

A split view (another root at the pinned size, or no consistency), a
rollback (a smaller tree) or a bad signature is an alarm: its evidence, the
pinned and the observed checkpoints with their notes in full, is printed
(JSON) and, with --webhook, POSTed there as JSON, signed per Standard
Webhooks with --webhook-secret (or AUDITCHAIN_MONITOR_WEBHOOK_SECRET); the
pin stays.
With --once the check runs one time and an alarm exits 4; otherwise it
polls every --interval until interrupted, reporting each alarm once.

The first run trusts the service key the service names and records it in
FILE (trust on first use) unless --service-key gives it. docs/integrity.md
"Monitor" says what this proves and what it does not.

The service is --url and --api-key, else AUDITCHAIN_URL and AUDITCHAIN_API_KEY.
Exit codes: 0 checked (pinned, advanced, unchanged, awaiting cosignatures,
advanced to witnessed), 1 no check could be made, 2 a usage error, 4 an alarm (docs/cli.md).
`

// pinFlags are the trust flags monitor and chain verify --pin share.
type pinFlags struct {
	serviceKey  *string
	witnessKeys multiFlag
	quorum      *int
}

func addPinFlags(fs *flag.FlagSet) *pinFlags {
	p := &pinFlags{}
	p.serviceKey = fs.String("service-key", "", "the service public key to trust on first use (base64, or a file; default: the service's own answer, trusted on first use)")
	fs.Var(&p.witnessKeys, "witness", "a witness's note verifier key (repeatable): pin only checkpoints it cosigned")
	p.quorum = fs.Int("quorum", 0, "cosignatures required of the --witness keys (default: all of them)")
	return p
}

// options settles the flags into the check's options.
func (p *pinFlags) options(cmd, userID string) (monitor.Options, error) {
	o := monitor.Options{UserID: userID, Quorum: *p.quorum}
	ws, err := witnessesOf(cmd, p.witnessKeys, &o.Quorum)
	if err != nil {
		return o, err
	}
	o.Witnesses = ws
	if *p.serviceKey != "" {
		pub, err := readServiceKey(*p.serviceKey)
		if err != nil {
			return o, usagef("%s: --service-key: %v", cmd, err)
		}
		o.ServiceKey = pub
	}
	return o, nil
}

func monitorCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("monitor", monitorUsage)
	url, key := serviceFlags(fs, getenv)
	account := fs.String("account", "", "the account's user_id (the API key must be of it)")
	state := fs.String("state", "", "the state file: the pinned checkpoint and trusted key (created on first use)")
	pf := addPinFlags(fs)
	interval := fs.Duration("interval", time.Minute, "how often to poll")
	once := fs.Bool("once", false, "check one time; exit 4 on an alarm")
	webhook := fs.String("webhook", "", "POST each alarm's evidence (JSON) to this URL")
	var webhookSecret string
	config.SecretVar(fs, &webhookSecret, "webhook-secret", getenv("AUDITCHAIN_MONITOR_WEBHOOK_SECRET"), "",
		"sign the webhook's posts per Standard Webhooks with this whsec_ secret (AUDITCHAIN_MONITOR_WEBHOOK_SECRET)")
	asJSON := fs.Bool("json", false, "one JSON object per check (alarms are JSON either way)")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if err := noPositional(rest); err != nil {
		return err
	}
	switch {
	case *account == "":
		return usagef("monitor: --account USER_ID is required: the account whose log is held to its pin")
	case *state == "":
		return usagef("monitor: --state FILE is required: where the pin is kept")
	case *interval <= 0:
		return usagef("monitor: --interval must be positive, like 1m")
	case *webhook != "" && !strings.HasPrefix(*webhook, "http://") && !strings.HasPrefix(*webhook, "https://"):
		return usagef("monitor: --webhook must be an http:// or https:// URL")
	case flagGiven(fs, "webhook-secret") && *webhook == "":
		return usagef("monitor: --webhook-secret signs the posts of --webhook URL, which is not given")
	}
	switch {
	case *webhook == "":
		webhookSecret = "" // AUDITCHAIN_MONITOR_WEBHOOK_SECRET waits for a --webhook
	case webhookSecret != "":
		// The secret's form is checked now, not at the first alarm.
		if _, err := notifywebhook.Sign(webhookSecret, "check", time.Unix(0, 0), nil); err != nil {
			return usagef("monitor: --webhook-secret (or AUDITCHAIN_MONITOR_WEBHOOK_SECRET): %v (the receiver's secret, like whsec_ and base64)", err)
		}
	}
	if err := serviceMissing("monitor", *url, *key); err != nil {
		return err
	}
	o, err := pf.options("monitor", *account)
	if err != nil {
		return err
	}
	c, err := client.New(*url, *key, client.WithSurface(client.SurfaceCLI))
	if err != nil {
		return usageError{err}
	}
	m := &monitor.Monitor{Source: c, StatePath: *state, Options: o, Interval: *interval, Webhook: *webhook,
		WebhookSecret: webhookSecret}
	if *once {
		r, err := m.Once(ctx)
		return reportCheck("monitor", *url, stdout, r, err, *asJSON)
	}
	m.Report = func(r *monitor.Result, err error) {
		if err != nil {
			fmt.Fprintln(stderr, "auditchain: monitor:", outOfReach(err, *url))
			return
		}
		if perr := printMonitorResult(stdout, r, *asJSON); perr != nil {
			fmt.Fprintln(stderr, "auditchain: monitor:", perr)
		}
	}
	return m.Run(ctx)
}

// reportCheck prints one check's result and turns an alarm into exit 4.
func reportCheck(cmd, url string, stdout io.Writer, r *monitor.Result, err error, asJSON bool) error {
	if r != nil {
		if perr := printMonitorResult(stdout, r, asJSON); perr != nil {
			return perr
		}
	}
	switch {
	case r != nil && r.Alarm != nil:
		if err != nil {
			return fmt.Errorf("%s: %w; and %v", cmd, alarmError{r.Alarm}, err)
		}
		return fmt.Errorf("%s: %w", cmd, alarmError{r.Alarm})
	case err != nil:
		return fmt.Errorf("%s: %w", cmd, outOfReach(err, url))
	}
	return nil
}

func outOfReach(err error, url string) error {
	if o := serviceOutOfReach(err, url); o != nil {
		return o
	}
	return errors.New(strings.TrimPrefix(err.Error(), "auditchain: "))
}

// printMonitorResult prints a result: an alarm as its evidence in JSON whatever the
// format (it is meant to be kept), else one line, or JSON with --json.
func printMonitorResult(w io.Writer, r *monitor.Result, asJSON bool) error {
	if asJSON || r.Alarm != nil {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	line := fmt.Sprintf("%s %s: block %d, tree size %d, root %s", r.Status, r.Origin, r.Observed.BlockIndex, r.Observed.TreeSize, r.Observed.RootHash)
	witnesses := ""
	if r.Quorum != nil {
		witnesses = fmt.Sprintf("; witnesses %d of %d required (cosigned: %s)", len(r.Quorum.Cosigned), r.Quorum.Required, strings.Join(r.Quorum.Cosigned, ", "))
	}
	switch {
	case r.Pinned != nil && r.Pinned != r.Observed && r.Status != monitor.StatusAwaitingCosignatures:
		// Pinned, behind the newest, to the block the witnesses cosigned:
		// the quorum is that block's.
		line += fmt.Sprintf("; pinned: block %d, tree size %d", r.Pinned.BlockIndex, r.Pinned.TreeSize) + witnesses
	case r.Pinned != nil && r.Pinned != r.Observed:
		line += witnesses + fmt.Sprintf("; pinned: block %d, tree size %d", r.Pinned.BlockIndex, r.Pinned.TreeSize)
	default:
		line += witnesses
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
