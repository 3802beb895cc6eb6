package app

// The anchor sweep (SPEC.md "Operator cron" anchor, docs/decisions/anchor.md):
// POST /v1/internal/cron/anchor timestamps, with the configured provider, the
// newest sealed block of every account whose chain grew since its last
// receipt. Each receipt is stored (anchors) and recorded on the account's chain
// as an anchor event through the single append path.

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/auditchain/auditchain/internal/anchor"
	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// EventAnchor is the type of the event recording a receipt on the chain.
const EventAnchor = "anchor"

// Statuses of an anchor sweep.
const (
	AnchorDisabled        = "anchoring_disabled"     // provider none: nobody visited
	AnchorMisconfigured   = "provider_misconfigured" // unknown provider, or rfc3161 without a URL
	AnchorCompleted       = "completed"              // every account visited, no failure
	AnchorCompletedFailed = "completed_with_failures"
)

// anchorPage is how many accounts a sweep reads per query.
const anchorPage = 500

type anchorOutcome int

const (
	outcomeAnchored anchorOutcome = iota
	outcomeNoRoot
	outcomeUnchanged
)

// anchorTimeout bounds one request to the Time-Stamp Authority.
const anchorTimeout = 30 * time.Second

// AnchorSweep runs the anchor cron once over every account, in id order.
// One account's failure is counted and logged; the sweep goes on.
func (a *App) AnchorSweep(ctx context.Context) (api.AnchorSweep, error) {
	res := api.AnchorSweep{Provider: a.cfg.AnchorProvider}
	prov, err := anchor.New(a.cfg.AnchorProvider, a.cfg.AnchorTSAURL, &http.Client{Timeout: anchorTimeout})
	if err != nil {
		msg := err.Error()
		res.Status, res.Error = AnchorMisconfigured, &msg
		return res, nil
	}
	if prov == nil {
		res.Status = AnchorDisabled
		return res, nil
	}
	after := ""
	for {
		ids, err := a.store.AccountIDs(ctx, after, anchorPage)
		if err != nil {
			return res, err
		}
		for _, id := range ids {
			res.Users++
			out, err := a.anchorAccount(ctx, prov, id)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				res.AnchorFailed++
				a.log.Warn("anchor failed", "user_id", id, "provider", prov.Name(), "err", err)
			case out == outcomeAnchored:
				res.Anchored++
			case out == outcomeNoRoot:
				res.NoRoot++
			default:
				res.Unchanged++
			}
		}
		if len(ids) < anchorPage {
			break
		}
		after = ids[len(ids)-1]
	}
	res.Status = AnchorCompleted
	if res.AnchorFailed > 0 {
		res.Status = AnchorCompletedFailed
	}
	return res, nil
}

var errAnchoredMeanwhile = errors.New("anchored meanwhile")

// anchorAccount anchors one account if its chain grew since its last receipt:
// it seals the tip, has the newest block's hash (SHA-256 of its signed note,
// verify.BlockHash) stamped as the message imprint, and records the
// receipt. The chain counts as unchanged when nothing was appended after the
// last anchor event itself, so a sweep never anchors its own receipt.
func (a *App) anchorAccount(ctx context.Context, prov anchor.Provider, userID string) (anchorOutcome, error) {
	head, err := a.store.Head(ctx, userID)
	if err != nil {
		return 0, err
	}
	if head.EventCount == 0 {
		return outcomeNoRoot, nil
	}
	last, err := a.store.LastAnchor(ctx, nil, userID)
	hasLast := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	if hasLast && last.ChainSize >= head.EventCount {
		return outcomeUnchanged, nil
	}
	block, ok, err := a.Seal(ctx, userID)
	if err != nil || !ok {
		return 0, err
	}
	if hasLast && block.Index <= last.BlockIndex {
		return outcomeUnchanged, nil
	}
	receipt, err := prov.Timestamp(ctx, block.Hash)
	if err != nil {
		return 0, err
	}
	now := a.now()
	p := Principal{UserID: userID, Kind: "service"}
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		if _, err := t.Lock(ctx, userID); err != nil {
			return err
		}
		// Another replica's sweep may have anchored this block meanwhile.
		switch l, err := a.store.LastAnchor(ctx, t.SQL(), userID); {
		case err == nil && l.BlockIndex >= block.Index:
			return errAnchoredMeanwhile
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		raw := map[string]any{
			"provider": prov.Name(), "tsa_url": receipt.URL, "hash_algorithm": "sha256",
			"block_index": block.Index, "tree_size": block.Size, "root_hash": block.Root, "block_hash": block.Hash,
			"message_imprint": block.Hash, "gen_time": domain.FormatTimestamp(receipt.GenTime),
			"serial_number": receipt.SerialNumber, "token": base64.StdEncoding.EncodeToString(receipt.Token),
		}
		ev, err := a.appendServerEvent(ctx, t, p, ServerEvent{EventType: EventAnchor, Raw: raw})
		if err != nil {
			return err
		}
		return a.store.InsertAnchor(ctx, t.SQL(), store.Anchor{UserID: userID, BlockIndex: block.Index, TreeSize: int64(block.Size),
			RootHash: block.Root[:], BlockHash: block.Hash[:], Provider: prov.Name(), TSAURL: receipt.URL, Token: receipt.Token,
			GenTime: receipt.GenTime.UnixMicro(), SerialNumber: receipt.SerialNumber, EventID: ev.EventID,
			ChainSize: ev.LeafIndex + 1, CreatedAt: now.UnixMicro()})
	})
	if errors.Is(err, errAnchoredMeanwhile) || errors.Is(err, store.ErrConflict) {
		return outcomeUnchanged, nil
	}
	if err != nil {
		return 0, err
	}
	return outcomeAnchored, nil
}

// AnchorReceipt is an account's newest anchor receipt as the console shows it.
type AnchorReceipt struct {
	Provider     string
	TSAURL       string
	BlockIndex   int64
	TreeSize     int64
	GenTime      time.Time
	SerialNumber string
	EventID      string // the anchor event recording it on the chain
}

// LastAnchor is the caller's newest anchor receipt (nil when the account was
// never anchored).
func (a *App) LastAnchor(ctx context.Context, p Principal) (*AnchorReceipt, error) {
	l, err := a.store.LastAnchor(ctx, nil, p.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &AnchorReceipt{Provider: l.Provider, TSAURL: l.TSAURL, BlockIndex: l.BlockIndex, TreeSize: l.TreeSize,
		GenTime: time.UnixMicro(l.GenTime).UTC(), SerialNumber: l.SerialNumber, EventID: l.EventID}, nil
}

// AnchorProvider is the configured anchor provider (--anchor-provider).
func (a *App) AnchorProvider() string { return a.cfg.AnchorProvider }
