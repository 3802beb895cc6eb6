package domain

import (
	"testing"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/google/go-cmp/cmp"
)

// Expected phases were computed independently with Python's decimal module:
// (Decimal(i) / Decimal("29.530589")).quantize(Decimal("0.000001"), ROUND_FLOOR).
func TestEpochStamp(t *testing.T) {
	anchor := DefaultEpochAnchor
	day := func(i int) time.Time { return anchor.AddDate(0, 0, i).Add(13 * time.Hour) }
	tests := []struct {
		name      string
		now       time.Time
		wantIndex int64
		wantPhase string
		wantCycle int64
		wantQuad  string
	}{
		{"anchor day", day(0), 0, "0.000000", 0, "q1"},
		{"last instant of the anchor day", anchor.Add(24*time.Hour - time.Nanosecond), 0, "0.000000", 0, "q1"},
		{"first instant of day 1", anchor.Add(24 * time.Hour), 1, "0.033863", 0, "q1"},
		{"last q1 day", day(7), 7, "0.237042", 0, "q1"},
		{"first q2 day", day(8), 8, "0.270905", 0, "q2"},
		{"last q2 day", day(14), 14, "0.474084", 0, "q2"},
		{"first q3 day", day(15), 15, "0.507947", 0, "q3"},
		{"last q3 day", day(22), 22, "0.744990", 0, "q3"},
		{"first q4 day", day(23), 23, "0.778853", 0, "q4"},
		{"last day of cycle 0", day(29), 29, "0.982032", 0, "q4"},
		{"first day of cycle 1", day(30), 30, "1.015895", 1, "q1"},
		{"last day of cycle 1", day(59), 59, "1.997928", 1, "q4"},
		{"first day of cycle 2", day(60), 60, "2.031791", 2, "q1"},
		{"far from the anchor", day(700), 700, "23.704234", 23, "q3"},
		{"before the anchor", day(-1), -1, "-0.033864", -1, "q4"},
		{"offset timestamps count by their UTC day", time.Date(2025, 1, 2, 0, 30, 0, 0, time.FixedZone("+01", 3600)), 0, "0.000000", 0, "q1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewEpochStamp(anchor, tt.now)
			want := api.EpochStamp{
				Anchor: "2025-01-01", DateUTC: tt.now.UTC().Format(time.DateOnly), EpochIndex: tt.wantIndex,
				Quadrant: tt.wantQuad, Scheme: "svc-epoch-v1",
				Phase: api.EpochPhase{AccumulatedPhase: tt.wantPhase, CycleNumber: tt.wantCycle, EpochIndex: tt.wantIndex, Scheme: "epoch-accumulation-v1"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("stamp mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// No float drift: every day of 10,000 matches exact integer arithmetic.
func TestEpochStampExactOverManyDays(t *testing.T) {
	for i := int64(0); i < 10_000; i++ {
		got := NewEpochStamp(DefaultEpochAnchor, DefaultEpochAnchor.AddDate(0, 0, int(i)))
		micro := i * 1_000_000_000_000 / 29530589
		if got.Phase.CycleNumber != micro/1_000_000 || got.EpochIndex != i {
			t.Fatalf("day %d: %+v", i, got)
		}
	}
}
