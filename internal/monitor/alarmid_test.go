package monitor

import "testing"

// A signed post's webhook-id names the evidence, not the moment: the same
// alarm seen again at a later poll (another detected_at) keeps its id, so a
// receiver that deduplicates by id (Standard Webhooks) takes it once; other
// evidence gets another id.
func TestAlarmIDNamesTheEvidence(t *testing.T) {
	a := &Alarm{Kind: KindSplitView, Pinned: &Checkpoint{Note: "pinned"}, Observed: &Checkpoint{Note: "observed"},
		DetectedAt: "2026-11-28T15:00:00Z"}
	again := *a
	again.DetectedAt = "2026-11-28T15:01:00Z"
	if alarmID(a) != alarmID(&again) {
		t.Error("the same evidence at a later poll has another id")
	}
	for name, other := range map[string]*Alarm{
		"another kind":            {Kind: KindRollback, Pinned: a.Pinned, Observed: a.Observed},
		"another observed note":   {Kind: a.Kind, Pinned: a.Pinned, Observed: &Checkpoint{Note: "observed2"}},
		"a block at pinned size":  {Kind: a.Kind, Pinned: a.Pinned, Observed: a.Observed, AtPinnedSize: &Checkpoint{Note: "x"}},
		"notes moved between two": {Kind: a.Kind, Pinned: &Checkpoint{Note: "pinnedobserved"}, Observed: &Checkpoint{}},
	} {
		if alarmID(other) == alarmID(a) {
			t.Errorf("%s: the same id", name)
		}
	}
}
