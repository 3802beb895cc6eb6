package app

import (
	"context"
	"log/slog"
	"slices"
	"testing"
)

// The supervisor stops its loops last started first, each once it has
// returned, and only once; a loop added after it stopped is stopped at once.
func TestSupervisorStopsLastStartedFirst(t *testing.T) {
	s := supervisor{log: slog.New(slog.DiscardHandler)}
	var ended []string // appended by each loop as it returns; stop waits for it
	for _, name := range []string{"bus", "mailer", "usage flush", "scheduler"} {
		s.run(context.Background(), name, func(ctx context.Context) {
			<-ctx.Done()
			ended = append(ended, name)
		})
	}
	s.stop()
	if want := []string{"scheduler", "usage flush", "mailer", "bus"}; !slices.Equal(ended, want) {
		t.Fatalf("loops ended in the order %q, want %q", ended, want)
	}
	s.stop()
	if len(ended) != 4 {
		t.Fatalf("a second stop stopped loops again: %q", ended)
	}
	late := false
	s.onStop("late", func() { late = true })
	if !late {
		t.Fatal("a loop added after stop was left running")
	}
}
