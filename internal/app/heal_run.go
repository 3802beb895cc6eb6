package app

// The heal run (SPEC.md "Heal records"): one chain_repair event per finding no
// earlier run answered, appended through the single append path.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// findingJSON is a finding (api.HealBreak, api.HealGap or api.HealSignatureFailure:
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
			switch r, err := a.store.HealRepairByKey(ctx, nil, p.UserID, f.key); {
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
			now := a.now()
			for _, f := range findings {
				act := api.HealRepairAction{Kind: f.kind, FindingKey: f.key, Finding: findingJSON(f.detail)}
				switch r, err := a.store.HealRepairByKey(ctx, t.SQL(), p.UserID, f.key); {
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
				if err := a.store.InsertHealRepair(ctx, t.SQL(), store.HealRepair{UserID: p.UserID, FindingKey: f.key, Kind: f.kind,
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
	res.CompletedAt = domain.FormatTimestamp(a.now())
	a.heal.setRun(p.UserID, res)
	return res, nil
}

// CodeHealConflict answers a heal run that lost a race it should not be able
// to lose (the unique key caught a double write).
const CodeHealConflict = "heal_conflict"
