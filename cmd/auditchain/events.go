package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

const eventsUsage = `usage: auditchain events <command> [flags]

commands:
  append --type T [--raw JSON] [--decision D] [--tool T] [--parent ID] [--id ID]
                       append one event at the chain's tip (signed with --sign-key)
  search [--type T] [--decision D] [--tool T] [--limit N] [--cursor C]
                       search the account's events, newest first
  get EVENT_ID         read one event and its ancestry
  tail [--count N]     print events as they are appended (one JSON line each)
`

var eventVerbs = []verb{
	{"append", "usage: auditchain events append --type T [--raw JSON] [--decision D] [--tool T] [--parent ID] [--id ID]\n\nAppends at the tip, which the service numbers it at (POST /v1/events/append),\nchecks payload_hash, and resends the same event_id if an answer is lost.\n--sign-key signs it.\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			typ := fs.String("type", "", "event_type (required)")
			raw := fs.String("raw", "", "the event's structure: a JSON object (hashes and ids, not text)")
			decision := fs.String("decision", "", "decision (allow, deny, …)")
			tool := fs.String("tool", "", "tool name")
			parent := fs.String("parent", "", "parent event_id")
			id := fs.String("id", "", "event_id (default: a new evt-…)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				if *typ == "" {
					return nil, usagef("events append needs --type")
				}
				ev := client.Event{EventID: *id, EventType: *typ, Decision: optString(*decision), Tool: optString(*tool), ParentID: optString(*parent)}
				if *raw != "" {
					var obj map[string]any
					if err := json.Unmarshal([]byte(*raw), &obj); err != nil {
						return nil, usagef("--raw must be a JSON object: %v", err)
					}
					ev.Raw = json.RawMessage(*raw)
				}
				// The service numbers it: the verb chooses no place, so it
				// reads no tip and goes on whatever sequence a client's own
				// events took the tip to (CONTRACT.md "Batch": the 2^52 cap
				// binds what clients choose).
				res, err := c.AppendNext(ctx, ev)
				if err != nil {
					return nil, err
				}
				return res, nil
			}
		}},
	{"search", "usage: auditchain events search [--type T] [--decision D] [--tool T] [--limit N] [--cursor C]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			var types multiFlag
			fs.Var(&types, "type", "event_type (repeatable)")
			decision := fs.String("decision", "", "decision")
			tool := fs.String("tool", "", "tool name")
			limit := fs.Int("limit", 0, "results per page (0: the service's default)")
			cursor := fs.Int64("cursor", -1, "continue from a previous page's next_cursor")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				req := api.SearchRequest{EventTypes: types, Decision: optString(*decision), Tool: optString(*tool)}
				if *limit > 0 {
					req.Limit = limit
				}
				if *cursor >= 0 {
					req.Cursor = cursor
				}
				return c.Search(ctx, req)
			}
		}},
	idVerb("get", "EVENT_ID", "usage: auditchain events get EVENT_ID\n", (*client.Client).Event),
	{"tail", "usage: auditchain events tail [--count N]\n\nPrints each event appended from now on as one JSON line, reconnecting (and\ncatching up) after a dropped connection, until interrupted or --count events.\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			count := fs.Int("count", 0, "stop after this many events (0: until interrupted)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				out := verbStdout(ctx)
				n := 0
				err := c.Stream(ctx, func(m client.StreamMessage) error {
					if m.Kind == "ready" {
						// On stderr, so stdout stays one event per line: from
						// here on nothing appended is missed.
						fmt.Fprintln(streamsOf(ctx).stderr, "auditchain events tail: listening")
						return nil
					}
					if m.Kind != "event" {
						return nil
					}
					if err := writeLine(out, m.Event); err != nil {
						return err
					}
					if n++; *count > 0 && n >= *count {
						return client.ErrStopStream
					}
					return nil
				})
				if errors.Is(err, context.Canceled) {
					err = nil // interrupted: the normal end of a tail
				}
				return nil, err
			}
		}},
}

// writeLine writes v as one line of JSON.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func eventsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return clientGroup(ctx, "events", eventsUsage, eventVerbs, args, getenv, stdout, stderr)
}
