package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/progress"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// ttyBuffer is a stderr that says it is a terminal (progress.IsTerminal).
type ttyBuffer struct{ bytes.Buffer }

func (*ttyBuffer) IsTerminal() bool { return true }

// runStreams runs the program with stderr as given and returns stdout.
func runStreams(t *testing.T, getenv func(string) string, stderr *bytes.Buffer, tty bool, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	var err error
	if tty {
		tb := &ttyBuffer{}
		err = run(context.Background(), args, getenv, &out, tb)
		stderr.Write(tb.Bytes())
	} else {
		err = run(context.Background(), args, getenv, &out, stderr)
	}
	if err != nil {
		t.Fatalf("%v: %v; stderr %q", args, err, stderr.String())
	}
	return out.String()
}

// chain export, chain verify and verify export show their progress on a terminal's
// stderr, ending with a summary line; with --quiet, or when stderr is not a
// terminal, stderr stays empty. The export on stdout is the same either way.
func TestChainProgressOnATerminalOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{})
		_, token := s.Account(t, "progress@example.com")
		env := cliEnv(s.URL, token)
		const events = 5
		for i := range events {
			runJSON(t, env, 0, "events", "append", "--type", "tool_call", "--tool", fmt.Sprint("t", i))
		}

		var drawn bytes.Buffer
		onTTY := runStreams(t, env, &drawn, true, "chain", "export")
		want := fmt.Sprintf("\rchain export: %d of %d events (100%%), ", events, events)
		if !strings.Contains(drawn.String(), want) || !strings.HasSuffix(drawn.String(), "s\n") {
			t.Fatalf("export on a terminal drew %q, want %q and a summary line", drawn.String(), want)
		}
		for _, quiet := range []struct {
			tty  bool
			args []string
		}{
			{true, []string{"chain", "export", "--quiet"}},
			{false, []string{"chain", "export"}},
		} {
			var errOut bytes.Buffer
			got := runStreams(t, env, &errOut, quiet.tty, quiet.args...)
			if errOut.Len() != 0 {
				t.Errorf("%v (terminal %v): stderr %q, want nothing", quiet.args, quiet.tty, errOut.String())
			}
			if n, m := strings.Count(got, `{"kind":"event"`), strings.Count(onTTY, `{"kind":"event"`); n != events || m != events {
				t.Errorf("%v: %d events exported, %d on the terminal run, want %d", quiet.args, n, m, events)
			}
		}

		// The offline check of that export counts the lines it reads.
		dir := t.TempDir()
		exportFile, keyFile := dir+"/chain.ndjson", dir+"/service-key.json"
		if err := os.WriteFile(exportFile, []byte(onTTY), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, []byte(runStreams(t, env, new(bytes.Buffer), false, "chain", "public-key")), 0o600); err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(onTTY, "\n")
		drawn.Reset()
		runStreams(t, env, &drawn, true, "verify", "export", exportFile, "--service-key", keyFile)
		if want := fmt.Sprintf("\rverify export: %d lines read, ", lines); !strings.Contains(drawn.String(), want) || !strings.HasSuffix(drawn.String(), "s\n") {
			t.Fatalf("verify export on a terminal drew %q, want %q and a summary line", drawn.String(), want)
		}
		drawn.Reset()
		runStreams(t, env, &drawn, true, "verify", "export", exportFile, "--service-key", keyFile, "--quiet")
		if drawn.Len() != 0 {
			t.Fatalf("verify export --quiet drew %q", drawn.String())
		}

		drawn.Reset()
		runStreams(t, env, &drawn, true, "chain", "verify", "--json")
		if !strings.HasPrefix(drawn.String(), "\rchain verify, waiting for the service: ") || !strings.HasSuffix(drawn.String(), "s\n") {
			t.Fatalf("verify on a terminal drew %q", drawn.String())
		}
		drawn.Reset()
		runStreams(t, env, &drawn, true, "chain", "verify", "--json", "--quiet")
		if drawn.Len() != 0 {
			t.Fatalf("verify --quiet drew %q", drawn.String())
		}
		// A verb that answers within progressDelay draws nothing.
		drawn.Reset()
		runStreams(t, env, &drawn, true, "chain", "tip")
		if drawn.Len() != 0 {
			t.Fatalf("chain tip drew %q", drawn.String())
		}
	})
}

// The export's event lines are counted wherever the writes cut them.
func TestEventCounterCountsAcrossWrites(t *testing.T) {
	export := `{"kind":"header","header":{}}` + "\n" +
		`{"kind":"event","event":{"event_id":"a"}}` + "\n" +
		`{"kind":"checkpoint","checkpoint":{}}` + "\n" +
		"{}\n" +
		`{"kind":"event","event":{"event_id":"b"}}` + "\n" +
		`{"kind":"event","event":{"event_id":"c"}}` + "\n" +
		`{"kind":"end","end":{"events":3}}` + "\n"
	for size := 1; size <= len(export); size++ {
		var drawn, out bytes.Buffer
		line := progress.Start(&drawn, true, progress.Options{Label: "x", Unit: "events", Every: 1, Now: fixedClock})
		ec := &eventCounter{w: &out, line: line}
		for rest := export; rest != ""; {
			n := min(size, len(rest))
			ec.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		line.Done()
		if out.String() != export {
			t.Fatalf("writes of %d: passed %q", size, out.String())
		}
		if !strings.HasSuffix(drawn.String(), "\rx: 3 events, 0.0s\n") {
			t.Fatalf("writes of %d: drew %q, want 3 events counted", size, drawn.String())
		}
	}
}

var fixedClock = func() time.Time { return time.Unix(0, 0) }
