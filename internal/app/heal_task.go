package app

// The periodic heal task (SPEC.md "Periodic heal task"): a scan per period on
// the scheduler's loop, per process.

import (
	"context"
	"fmt"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/schedule"
	"github.com/auditchain/auditchain/pkg/api"
)

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
	return a.heal.stop(p.UserID, domain.FormatTimestamp(a.now()))
}

type autoTask struct {
	id        string
	period    int
	startedAt string
	started   time.Time
	cancel    context.CancelFunc
	done      chan struct{}
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
	t := &autoTask{id: id, period: period, startedAt: domain.FormatTimestamp(a.now()), started: now, cancel: cancel, done: make(chan struct{})}
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
				a.log.Warn("periodic heal scan failed", "user_id", userID, "task_id", t.id, "err", err)
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

// stopAll ends every periodic heal task of this process (shutdown, by the
// supervisor); none starts afterwards.
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
