package app

// The per-process heal cache behind GET /v1/heal/status (SPEC.md: per account
// and per process).

import (
	"sync"

	"github.com/auditchain/auditchain/pkg/api"
)

// HealStatus answers GET /v1/heal/status from this process's cache (SPEC.md:
// per account and per process).
func (a *App) HealStatus(p Principal) api.HealStatus {
	return a.heal.status(p.UserID)
}

// healState is the per-process heal cache and the running tasks.
type healState struct {
	mu    sync.Mutex
	users map[string]*healUser
	// closed is set by Close: no task starts afterwards.
	closed bool
}

type healUser struct {
	lastScan *api.HealScan
	lastRun  *api.HealRun
	task     *autoTask
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

func (h *healState) setScan(userID string, r api.HealScan) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.user(userID).lastScan = &r
}

func (h *healState) setRun(userID string, r api.HealRun) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.user(userID).lastRun = &r
}

func (h *healState) status(userID string) api.HealStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	u := h.user(userID)
	return api.HealStatus{AutoRunning: u.task != nil, LastScan: u.lastScan, LastRepair: u.lastRun}
}
