package console

// The usage panel: the account's credentialed calls per UTC day, by surface
// (a stacked bar chart drawn as SVG by the server: no script, no inline
// style, which the CSP forbids) and by capability, with the numbers in
// tables (nothing told by colour alone), and today's figures.

import (
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// usageDays are the days the chart offers; 30 unless ?days= says another.
var usageDays = []int{7, 30, 90}

// Chart geometry (SVG user units).
const (
	chartHeight = 160
	barWidth    = 14
	barGap      = 4
)

type usageBar struct {
	X         int
	Segments  []usageSegment
	Day       string
	Total     int64
	BarHeight int
}

type usageSegment struct {
	Surface    string
	X, Y, W, H int
	N          int64
}

type usagePage struct {
	Days     int
	Choices  []int
	Series   []app.UsageDay
	Bars     []usageBar
	Max      int64
	Total    int64
	Width    int
	Height   int
	Surfaces []string
	// Capabilities are the capability names the days used, in order.
	Capabilities []string
	Today        api.Usage
	Connect      connectHelp
}

func (c *Console) usage(w http.ResponseWriter, r *http.Request) error {
	p := viewerOf(r).Principal
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > app.MaxUsageDays {
			return domain.Validation(domain.FieldError{Field: "days", Message: "must be a whole number from 1 to " + strconv.Itoa(app.MaxUsageDays)})
		}
		days = n
	}
	series, err := c.App.UsageDays(r.Context(), p, days)
	if err != nil {
		return err
	}
	// Today's figures, and the chain's size from its head: not
	// DashboardUsage, whose grant counts read every grant row (p50 16 ms
	// at 10,000 grants, docs/performance.md "Console at size"); the
	// grants are the gate panel's.
	today, err := c.App.UsageToday(r.Context(), p)
	if err != nil {
		return err
	}
	tip, err := c.App.ChainTip(r.Context(), p)
	if err != nil {
		return err
	}
	today.TreeSize, today.Events.Total = tip.EventCount, tip.EventCount
	pg := usagePage{Days: days, Choices: usageDays, Series: series, Surfaces: domain.Surfaces, Today: today, Connect: connect(r),
		Height: chartHeight, Width: days * (barWidth + barGap)}
	caps := map[string]bool{}
	for _, d := range series {
		pg.Max = max(pg.Max, d.Total())
		pg.Total += d.Total()
		for k := range d.ByCapability {
			caps[k] = true
		}
	}
	// The scopes in their order, then "none", then any other name.
	for _, s := range domain.AllScopes {
		if caps[string(s)] {
			pg.Capabilities = append(pg.Capabilities, string(s))
			delete(caps, string(s))
		}
	}
	if caps[app.CapabilityNone] {
		pg.Capabilities = append(pg.Capabilities, app.CapabilityNone)
		delete(caps, app.CapabilityNone)
	}
	pg.Capabilities = append(pg.Capabilities, slices.Sorted(maps.Keys(caps))...)
	for i, d := range series {
		b := usageBar{X: i * (barWidth + barGap), Day: d.Day, Total: d.Total()}
		y := chartHeight
		for _, s := range domain.Surfaces {
			n := d.BySurface[s]
			if n == 0 || pg.Max == 0 {
				continue
			}
			h := int(n * chartHeight / pg.Max)
			if h == 0 {
				h = 1
			}
			y -= h
			b.Segments = append(b.Segments, usageSegment{Surface: s, X: b.X, Y: y, W: barWidth, H: h, N: n})
		}
		b.BarHeight = chartHeight - y
		pg.Bars = append(pg.Bars, b)
	}
	c.render(w, r, http.StatusOK, "usage", "Usage", pg)
	return nil
}
