package app

// The built-in scheduler's view of the operator jobs (CONTRACT.md "Operator
// jobs"): the same app methods the cron routes call, on their cadence, each
// period run by one replica (a row per job and period in the store), runs
// visible at GET /v1/internal/jobs and counted for metrics.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/schedule"
	"github.com/auditchain/auditchain/pkg/api"
)

// Job names: the cron routes' last path segment.
const (
	JobWebhooks    = "webhooks"
	JobDigest      = "digest"
	JobGrantExpiry = "grant-expiry"
	JobKeyExpiry   = "key-expiry"
	JobAdminDigest = "admin-digest"
	JobAnchor      = "anchor"
	// JobApprovalExpiry marks approvals past their time expired
	// (CONTRACT.md "Approvals").
	JobApprovalExpiry = "approval-expiry"
)

// witnessJob is the witness job (witness.go), run only when witnesses are configured.
func (a *App) witnessJob() []schedule.Job {
	if a.witnesses == nil || len(a.witnesses.clients) == 0 {
		return nil
	}
	return []schedule.Job{{Name: JobWitness, Cadence: schedule.Every(WitnessCadence), Run: func(ctx context.Context) error {
		_, err := a.WitnessSweep(ctx)
		return err
	}}}
}

// Jobs lists the operator jobs with CONTRACT.md's cadence.
func (a *App) Jobs() []schedule.Job {
	return append([]schedule.Job{
		{Name: JobWebhooks, Cadence: schedule.Every(2 * time.Minute), Run: a.dispatchWebhooks},
		{Name: JobDigest, Cadence: schedule.DailyAt(14, 0), Run: func(ctx context.Context) error {
			_, err := a.DigestAll(ctx)
			return err
		}},
		{Name: JobGrantExpiry, Cadence: schedule.Every(6 * time.Hour), Run: func(ctx context.Context) error {
			_, err := a.GrantExpirySweep(ctx)
			return err
		}},
		{Name: JobKeyExpiry, Cadence: schedule.Every(time.Hour), Run: func(ctx context.Context) error {
			_, err := a.KeyExpirySweep(ctx)
			return err
		}},
		{Name: JobAdminDigest, Cadence: schedule.DailyAt(7, 0), Run: func(ctx context.Context) error {
			_, err := a.AdminDigest(ctx)
			return err
		}},
		{Name: JobAnchor, Cadence: schedule.Every(time.Hour), Run: func(ctx context.Context) error {
			_, err := a.AnchorSweep(ctx)
			return err
		}},
		{Name: JobApprovalExpiry, Cadence: schedule.Every(time.Minute), Run: func(ctx context.Context) error {
			_, err := a.ApprovalExpirySweep(ctx)
			return err
		}},
	}, a.witnessJob()...)
}

// jobState is this process's scheduler and its replica id.
type jobState struct {
	mu      sync.Mutex
	runner  *schedule.Runner
	replica string
}

// startJobs runs the jobs on their cadence until ctx ends (Loops.Scheduler).
// waitJobs waits for the runs in progress once it has, and for the webhook
// senders they started, which run on ctx too.
func (a *App) startJobs(ctx context.Context) {
	r := a.newRunner()
	a.jobs.mu.Lock()
	a.jobs.runner = r
	a.jobs.mu.Unlock()
	a.hooks.mu.Lock()
	a.hooks.background = ctx
	a.hooks.mu.Unlock()
	r.Start(ctx)
}

// waitJobs returns once the scheduler started by startJobs has stopped.
func (a *App) waitJobs() {
	if r := a.runner(); r != nil {
		r.Wait()
		a.hooks.wg.Wait()
	}
}

func (a *App) runner() *schedule.Runner {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	return a.jobs.runner
}

func (a *App) newRunner() *schedule.Runner {
	// The runner reads the wall clock: its timers run on it, whatever
	// clock a test gives the App.
	return schedule.New(a.Jobs(), schedule.Options{Log: a.log, Lease: jobLease{a: a}, OnRun: a.recordRun})
}

// jobLease gives each (job, period) to the first replica whose row for it
// commits.
type jobLease struct{ a *App }

func (l jobLease) Acquire(ctx context.Context, job string, period time.Time) (bool, error) {
	return l.a.AcquireJobPeriod(ctx, job, period)
}

// AcquireJobPeriod reports whether this replica is the one to run job's
// period: true for exactly one caller per (job, period) across replicas,
// whatever becomes of the run (a replica that dies mid-run costs that
// period only; the next has a row of its own).
func (a *App) AcquireJobPeriod(ctx context.Context, job string, period time.Time) (bool, error) {
	replica := a.replicaID()
	var ok bool
	err := a.w.Write(ctx, func(t *writer.Tx) (err error) {
		ok, err = a.store.AcquireJobRun(ctx, t.SQL(), job, period, replica, a.now())
		return err
	})
	return ok, err
}

// recordRun records how a scheduled period this replica ran went, on the
// period's row (the runner counts every run for metrics).
func (a *App) recordRun(r schedule.Run) {
	if r.Trigger != schedule.TriggerSchedule || r.Skipped {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		return a.store.FinishJobRun(ctx, t.SQL(), r.Job, r.Period, r.Started.Add(r.Duration), r.Err)
	})
	if err != nil {
		a.log.Error("recording a job run failed", "job", r.Job, "err", err)
	}
}

// replicaID names this process in job_runs: random, made once.
func (a *App) replicaID() string {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	if a.jobs.replica == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		a.jobs.replica = hex.EncodeToString(b)
	}
	return a.jobs.replica
}

// kickWebhooks asks the scheduler to drain soon: a row was just queued.
func (a *App) kickWebhooks() {
	if r := a.runner(); r != nil {
		r.Kick(JobWebhooks)
	}
}

// JobsStatus is GET /v1/internal/jobs: every job, its cadence, the newest
// period any replica ran and how it went, and this replica's view (next
// run, last run) when its scheduler runs.
func (a *App) JobsStatus(ctx context.Context) (api.JobsStatus, error) {
	last, err := a.store.LastJobRuns(ctx)
	if err != nil {
		return api.JobsStatus{}, err
	}
	var scheduler bool
	var jobs []api.JobView
	r := a.runner()
	if r == nil {
		r = a.newRunner() // not started: cadence and next due time only
	} else {
		scheduler = true
	}
	for _, st := range r.Status() {
		v := api.JobView{Job: st.Name, Cadence: st.Cadence, Running: st.Running}
		if scheduler {
			next := domain.FormatTimestamp(st.Next)
			v.NextRun = &next
		}
		if run, ok := last[st.Name]; ok {
			lv := &api.JobRunView{Period: domain.FormatTimestamp(run.Period), Replica: run.Replica, StartedAt: domain.FormatTimestamp(run.StartedAt), Error: run.Error, Outcome: "running"}
			if run.FinishedAt != nil {
				f := domain.FormatTimestamp(*run.FinishedAt)
				d := float64(run.FinishedAt.Sub(run.StartedAt).Microseconds()) / 1000
				lv.FinishedAt, lv.DurationMS, lv.Outcome = &f, &d, "ok"
				if run.Error != nil {
					lv.Outcome = "failed"
				}
			}
			v.LastRun = lv
		}
		if st.Last != nil {
			l := &api.JobRunLocal{Trigger: string(st.Last.Trigger), StartedAt: domain.FormatTimestamp(st.Last.Started),
				DurationMS: float64(st.Last.Duration.Microseconds()) / 1000, Outcome: st.Last.Outcome()}
			if st.Last.Err != "" {
				e := st.Last.Err
				l.Error = &e
			}
			v.Replica = l
		}
		jobs = append(jobs, v)
	}
	return api.JobsStatus{Jobs: jobs, Replica: a.replicaID(), Scheduler: scheduler}, nil
}
