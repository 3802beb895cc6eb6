package schedule_test

import (
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/schedule"
)

func utc(year int, month time.Month, day, hour, minute, second, nsec int) time.Time {
	return time.Date(year, month, day, hour, minute, second, nsec, time.UTC)
}

func TestCadenceNext(t *testing.T) {
	ist := time.FixedZone("IST", 5*3600+1800)
	pst := time.FixedZone("PST", -8*3600)
	tests := []struct {
		name    string
		cadence schedule.Cadence
		at      time.Time
		want    time.Time
	}{
		{"every 2m at a boundary", schedule.Every(2 * time.Minute), utc(2026, 3, 1, 10, 0, 0, 0), utc(2026, 3, 1, 10, 2, 0, 0)},
		{"every 2m just after a boundary", schedule.Every(2 * time.Minute), utc(2026, 3, 1, 10, 0, 0, 1), utc(2026, 3, 1, 10, 2, 0, 0)},
		{"every 2m just before a boundary", schedule.Every(2 * time.Minute), utc(2026, 3, 1, 10, 1, 59, 999999999), utc(2026, 3, 1, 10, 2, 0, 0)},
		{"every 2m across midnight", schedule.Every(2 * time.Minute), utc(2026, 3, 1, 23, 59, 0, 0), utc(2026, 3, 2, 0, 0, 0, 0)},

		{"every 6h from midnight", schedule.Every(6 * time.Hour), utc(2026, 3, 1, 0, 0, 0, 0), utc(2026, 3, 1, 6, 0, 0, 0)},
		{"every 6h before 06:00", schedule.Every(6 * time.Hour), utc(2026, 3, 1, 5, 59, 59, 0), utc(2026, 3, 1, 6, 0, 0, 0)},
		{"every 6h at 06:00", schedule.Every(6 * time.Hour), utc(2026, 3, 1, 6, 0, 0, 0), utc(2026, 3, 1, 12, 0, 0, 0)},
		{"every 6h at 12:00", schedule.Every(6 * time.Hour), utc(2026, 3, 1, 12, 0, 0, 0), utc(2026, 3, 1, 18, 0, 0, 0)},
		{"every 6h at 18:00", schedule.Every(6 * time.Hour), utc(2026, 3, 1, 18, 0, 0, 0), utc(2026, 3, 2, 0, 0, 0, 0)},
		{"every 1h from a half-hour zone", schedule.Every(time.Hour), time.Date(2026, 3, 1, 10, 0, 0, 0, ist), utc(2026, 3, 1, 5, 0, 0, 0)},

		// A period that does not divide a day still counts from 1970, not
		// from year 1 (where time.Truncate counts from).
		{"every 7m at the epoch", schedule.Every(7 * time.Minute), time.Unix(0, 0), time.Unix(420, 0).UTC()},
		{"every 7m before the epoch", schedule.Every(7 * time.Minute), time.Unix(-1, 0), time.Unix(0, 0).UTC()},
		{"every 7m in 2026", schedule.Every(7 * time.Minute), time.Unix(1_772_000_000, 0), time.Unix(1_772_000_160, 0).UTC()},

		// EveryFrom counts from its start, not from the epoch.
		{"every 5m from start, at the start", schedule.EveryFrom(utc(2026, 3, 1, 10, 0, 17, 0), 5*time.Minute), utc(2026, 3, 1, 10, 0, 17, 0), utc(2026, 3, 1, 10, 5, 17, 0)},
		{"every 5m from start, before the start", schedule.EveryFrom(utc(2026, 3, 1, 10, 0, 17, 0), 5*time.Minute), utc(2026, 3, 1, 9, 0, 0, 0), utc(2026, 3, 1, 10, 5, 17, 0)},
		{"every 5m from start, just before a due time", schedule.EveryFrom(utc(2026, 3, 1, 10, 0, 17, 0), 5*time.Minute), utc(2026, 3, 1, 10, 10, 16, 0), utc(2026, 3, 1, 10, 10, 17, 0)},
		{"every 5m from start, at a due time", schedule.EveryFrom(utc(2026, 3, 1, 10, 0, 17, 0), 5*time.Minute), utc(2026, 3, 1, 10, 10, 17, 0), utc(2026, 3, 1, 10, 15, 17, 0)},
		{"every 5m from a start east of UTC", schedule.EveryFrom(time.Date(2026, 3, 1, 15, 30, 17, 0, ist), 5*time.Minute), utc(2026, 3, 1, 10, 0, 17, 0), utc(2026, 3, 1, 10, 5, 17, 0)},

		{"daily 14:00 before", schedule.DailyAt(14, 0), utc(2026, 3, 1, 13, 59, 59, 0), utc(2026, 3, 1, 14, 0, 0, 0)},
		{"daily 14:00 at", schedule.DailyAt(14, 0), utc(2026, 3, 1, 14, 0, 0, 0), utc(2026, 3, 2, 14, 0, 0, 0)},
		{"daily 14:00 just after", schedule.DailyAt(14, 0), utc(2026, 3, 1, 14, 0, 0, 1), utc(2026, 3, 2, 14, 0, 0, 0)},
		{"daily 14:00 late evening", schedule.DailyAt(14, 0), utc(2026, 3, 1, 23, 30, 0, 0), utc(2026, 3, 2, 14, 0, 0, 0)},
		{"daily 14:00 after midnight", schedule.DailyAt(14, 0), utc(2026, 3, 2, 0, 0, 1, 0), utc(2026, 3, 2, 14, 0, 0, 0)},
		{"daily 14:00 across the year", schedule.DailyAt(14, 0), utc(2026, 12, 31, 15, 0, 0, 0), utc(2027, 1, 1, 14, 0, 0, 0)},
		{"daily 14:00 into a leap day", schedule.DailyAt(14, 0), utc(2028, 2, 28, 15, 0, 0, 0), utc(2028, 2, 29, 14, 0, 0, 0)},
		{"daily 14:00 from east of UTC on the next local day", schedule.DailyAt(14, 0), time.Date(2026, 6, 1, 1, 0, 0, 0, ist), utc(2026, 6, 1, 14, 0, 0, 0)},
		{"daily 14:00 from east of UTC, past 14:00 UTC", schedule.DailyAt(14, 0), time.Date(2026, 6, 1, 20, 0, 0, 0, ist), utc(2026, 6, 2, 14, 0, 0, 0)},
		{"daily 14:00 from west of UTC, before 14:00 UTC", schedule.DailyAt(14, 0), time.Date(2026, 6, 1, 5, 0, 0, 0, pst), utc(2026, 6, 1, 14, 0, 0, 0)},
		{"daily 14:00 from west of UTC, past 14:00 UTC", schedule.DailyAt(14, 0), time.Date(2026, 6, 1, 7, 0, 0, 0, pst), utc(2026, 6, 2, 14, 0, 0, 0)},
		{"daily 07:00", schedule.DailyAt(7, 0), utc(2026, 3, 1, 6, 59, 0, 0), utc(2026, 3, 1, 7, 0, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cadence.Next(tt.at)
			if !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Errorf("%v.Next(%v) = %v, want %v in UTC", tt.cadence, tt.at, got, tt.want)
			}
		})
	}
}

func TestEveryAlignsToTheEpochFarFromIt(t *testing.T) {
	c := schedule.Every(7 * time.Minute)
	for _, at := range []time.Time{utc(1, 1, 1, 0, 0, 0, 0), utc(1500, 6, 1, 3, 4, 5, 6), utc(3000, 6, 1, 3, 4, 5, 6)} {
		got := c.Next(at)
		if got.Unix()%420 != 0 || got.Nanosecond() != 0 || !got.After(at) || got.Sub(at) > 7*time.Minute {
			t.Errorf("Next(%v) = %v, want the first multiple of 7m since 1970 after it", at, got)
		}
	}
}

func TestCadenceString(t *testing.T) {
	tests := []struct {
		cadence schedule.Cadence
		want    string
	}{
		{schedule.Every(2 * time.Minute), "every 2m0s"},
		{schedule.Every(6 * time.Hour), "every 6h0m0s"},
		{schedule.DailyAt(14, 0), "daily at 14:00 UTC"},
		{schedule.DailyAt(7, 5), "daily at 07:05 UTC"},
	}
	for _, tt := range tests {
		if got := tt.cadence.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestCadenceRejectsNonsense(t *testing.T) {
	for name, build := range map[string]func(){
		"Every(0)":       func() { schedule.Every(0) },
		"Every(-1s)":     func() { schedule.Every(-time.Second) },
		"DailyAt(24, 0)": func() { schedule.DailyAt(24, 0) },
		"DailyAt(0, 60)": func() { schedule.DailyAt(0, 60) },
		"DailyAt(-1, 0)": func() { schedule.DailyAt(-1, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			build()
		}()
	}
}
