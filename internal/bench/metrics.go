package bench

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"
)

// metricValue reads one unlabelled sample from the server's GET /metrics
// (the Prometheus text format: "NAME VALUE" on a line of its own); false
// when the server does not answer it within metricTimeout or has no such
// sample. An answer that comes late misses what was written meanwhile: the
// window's figure is then a little low, never high.
func metricValue(ctx context.Context, c *client, name string) (float64, bool) {
	ctx, cancel := context.WithTimeout(ctx, metricTimeout)
	defer cancel()
	var buf bytes.Buffer
	if _, err := c.do(ctx, "GET", "/metrics", "", nil, &buf); err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		value, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		return v, err == nil
	}
	return 0, false
}

// metricTimeout bounds a read of /metrics, which the window's sampler waits for.
const metricTimeout = 2 * time.Second

// walFramesMetric counts the pages the SQLite writer's commits wrote to the
// WAL (docs/operations.md); PostgreSQL reports 0.
const walFramesMetric = "auditchain_sqlite_wal_frames_total"
