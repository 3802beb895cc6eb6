package domain

import (
	"fmt"
	"github.com/auditchain/auditchain/pkg/api"
	"math/big"
	"time"
)

const (
	EpochScheme = "svc-epoch-v1"
	PhaseScheme = "epoch-accumulation-v1"
	// cycleMicro is the cycle length, 29.530589 days, in millionths of a day, so
	// the phase is computed in exact integer arithmetic.
	cycleMicro = 29530589
)

// DefaultEpochAnchor is the default deployment epoch origin (CONTRACT.md).
var DefaultEpochAnchor = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// NewEpochStamp computes the stamp for the UTC day containing now.
//
// accumulated_phase = epoch_index / 29.530589 with six fraction digits. We
// truncate (round toward negative infinity), so the whole part always equals
// cycle_number and the quadrant is that of the exact fraction: truncation never
// moves a value across a quarter boundary, which are multiples of 0.25.
func NewEpochStamp(anchor, now time.Time) api.EpochStamp {
	anchorDay := time.Date(anchor.Year(), anchor.Month(), anchor.Day(), 0, 0, 0, 0, time.UTC)
	n := now.UTC()
	day := time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, time.UTC)
	index := daysBetween(anchorDay, day)

	// phase6 = floor(index * 10^6 / 29.530589) = floor(index * 10^12 / 29530589)
	num := new(big.Int).Mul(big.NewInt(index), big.NewInt(1_000_000_000_000))
	phase6 := floorDiv(num, big.NewInt(cycleMicro))
	cycle, frac := floorDivMod(phase6, big.NewInt(1_000_000))

	var quadrant string
	switch f := frac.Int64(); {
	case f < 250_000:
		quadrant = "q1"
	case f < 500_000:
		quadrant = "q2"
	case f < 750_000:
		quadrant = "q3"
	default:
		quadrant = "q4"
	}
	phase := fmt.Sprintf("%d.%06d", cycle.Int64(), frac.Int64())
	if cycle.Sign() < 0 && frac.Sign() == 0 {
		phase = fmt.Sprintf("%d.000000", cycle.Int64())
	} else if cycle.Sign() < 0 {
		// Render the exact negative value: cycle + frac/10^6 with cycle < 0.
		neg := new(big.Int).Neg(phase6)
		whole, rest := new(big.Int).QuoRem(neg, big.NewInt(1_000_000), new(big.Int))
		phase = fmt.Sprintf("-%d.%06d", whole.Int64(), rest.Int64())
	}
	return api.EpochStamp{
		Anchor:     anchorDay.Format(time.DateOnly),
		DateUTC:    day.Format(time.DateOnly),
		EpochIndex: index,
		Quadrant:   quadrant,
		Scheme:     EpochScheme,
		Phase: api.EpochPhase{
			AccumulatedPhase: phase,
			CycleNumber:      cycle.Int64(),
			EpochIndex:       index,
			Scheme:           PhaseScheme,
		},
	}
}

// daysBetween counts whole UTC days from a to b (negative when b is earlier).
func daysBetween(a, b time.Time) int64 {
	// Both are UTC midnights, so the hour difference is an exact multiple of 24.
	return int64(b.Sub(a).Hours()) / 24
}

func floorDiv(a, b *big.Int) *big.Int {
	q, _ := floorDivMod(a, b)
	return q
}

// floorDivMod returns q, r with a = q*b + r and 0 <= r < b (b > 0).
func floorDivMod(a, b *big.Int) (*big.Int, *big.Int) {
	q, r := new(big.Int).DivMod(a, b, new(big.Int)) // Euclidean: r >= 0
	return q, r
}
