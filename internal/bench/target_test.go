package bench

import "testing"

// A worker keeps its own target unless SpreadRequests is set; then its
// appends go to every target.
func TestWorkerTargets(t *testing.T) {
	a, b, c := &client{base: "a"}, &client{base: "b"}, &client{base: "c"}
	for _, tc := range []struct {
		spread bool
		cs     []*client
		want   map[string]bool
	}{
		{false, []*client{a, b, c}, map[string]bool{"b": true}},
		{true, []*client{a, b, c}, map[string]bool{"a": true, "b": true, "c": true}},
		{true, []*client{a}, map[string]bool{"a": true}},
	} {
		e := &env{o: &Options{SpreadRequests: tc.spread}, cs: tc.cs}
		w := &worker{id: 1, e: e, c: e.clientFor(1)}
		got := map[string]bool{}
		for range 300 {
			got[w.target().base] = true
		}
		if len(got) != len(tc.want) {
			t.Errorf("spread=%v over %d targets: %v, want %v", tc.spread, len(tc.cs), got, tc.want)
		}
		for k := range tc.want {
			if !got[k] {
				t.Errorf("spread=%v over %d targets: %v, want %v", tc.spread, len(tc.cs), got, tc.want)
			}
		}
	}
}
