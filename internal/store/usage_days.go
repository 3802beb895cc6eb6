package store

import "context"

// UsageByDay is one account's counts of kind over the days [fromDay, toDay],
// by day and name (the console's usage chart). It reads the primary key's
// prefix (user_id, day, kind, name): at most the days asked times the names
// of kind.
func (s *Store) UsageByDay(ctx context.Context, userID, kind, fromDay, toDay string) (map[string]map[string]int64, error) {
	type row struct {
		day, name string
		n         int64
	}
	rows, err := queryAll(ctx, s, nil, func(r scanner) (row, error) {
		var x row
		return x, r.Scan(&x.day, &x.name, &x.n)
	}, `SELECT day, name, count FROM usage_counts WHERE user_id = $1 AND day >= $2 AND day <= $3 AND kind = $4`,
		userID, fromDay, toDay, kind)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int64{}
	for _, r := range rows {
		if out[r.day] == nil {
			out[r.day] = map[string]int64{}
		}
		out[r.day][r.name] += r.n
	}
	return out, nil
}
