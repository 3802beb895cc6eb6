package store_test

import (
	"database/sql"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// schemaOf is what the code relies on in a migrated database: its tables with
// their columns, each table's primary key, its unique column sets (constraints
// and unique indexes alike, whatever their names), and its other explicitly
// created indexes with their columns and whether they are partial. Types are
// left out on purpose: the dialects spell them differently (INTEGER / BIGINT,
// BLOB / BYTEA).
type schemaOf struct {
	Columns    map[string][]string // table → sorted column names
	PrimaryKey map[string]string   // table → "col,col" in key order
	Unique     map[string]bool     // "table(col,col)" for every unique index but the primary key
	Indexes    map[string]string   // index name → "table(col,col)", " partial" appended when it has a WHERE
}

func readSchema(t *testing.T, s *store.Store) schemaOf {
	t.Helper()
	out := schemaOf{Columns: map[string][]string{}, PrimaryKey: map[string]string{}, Unique: map[string]bool{}, Indexes: map[string]string{}}
	var columns, pk, indexes string
	switch s.Dialect {
	case store.SQLite:
		// Views too, as PostgreSQL's information_schema lists them.
		columns = `SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c
			WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite_%'`
		pk = `SELECT m.name, c.name, c.pk FROM sqlite_master m, pragma_table_info(m.name) c
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND c.pk > 0`
		// origin: c = CREATE INDEX, u = UNIQUE constraint, pk = primary key.
		indexes = `SELECT il.name, m.name, il."unique", il.origin = 'pk', il.partial, il.origin = 'c', ''
			FROM sqlite_master m, pragma_index_list(m.name) il
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`
	default:
		columns = `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`
		pk = `SELECT t.relname, a.attname, k.n FROM pg_index x
			JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace
			CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY k(attnum, n)
			JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
			WHERE ns.nspname = current_schema() AND x.indisprimary`
		indexes = `SELECT i.relname, t.relname, x.indisunique::int, x.indisprimary, x.indpred IS NOT NULL,
				NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid),
				(SELECT string_agg(coalesce(a.attname, '(expression)'), ',' ORDER BY k.n) FROM unnest(x.indkey) WITH ORDINALITY k(attnum, n)
					LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum)
			FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
			JOIN pg_namespace ns ON ns.oid = t.relnamespace WHERE ns.nspname = current_schema()`
	}
	query(t, s, columns, func(scan func(...any)) {
		var table, column string
		scan(&table, &column)
		out.Columns[table] = append(out.Columns[table], column)
	})
	for table := range out.Columns {
		slices.Sort(out.Columns[table])
	}
	type keyColumn struct {
		name string
		pos  int
	}
	pks := map[string][]keyColumn{}
	query(t, s, pk, func(scan func(...any)) {
		var table string
		var c keyColumn
		scan(&table, &c.name, &c.pos)
		pks[table] = append(pks[table], c)
	})
	for table, cols := range pks {
		slices.SortFunc(cols, func(a, b keyColumn) int { return a.pos - b.pos })
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = c.name
		}
		out.PrimaryKey[table] = strings.Join(names, ",")
	}
	query(t, s, indexes, func(scan func(...any)) {
		var index, table string
		var cols sql.NullString
		var unique int
		var primary, partial, created bool
		scan(&index, &table, &unique, &primary, &partial, &created, &cols)
		if s.Dialect == store.SQLite {
			cols.String = sqliteIndexColumns(t, s, index)
		}
		def := table + "(" + cols.String + ")"
		if partial {
			def += " partial"
		}
		switch {
		case primary:
		case unique == 1:
			out.Unique[def] = true
			if created {
				out.Indexes[index] = def + " unique"
			}
		case created:
			out.Indexes[index] = def
		}
	})
	return out
}

func query(t *testing.T, s *store.Store, q string, row func(scan func(...any))) {
	t.Helper()
	rows, err := s.DB().Query(q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	for rows.Next() {
		row(func(dest ...any) {
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// The dialects keep separate migrations (native SQL where the databases
// differ), so nothing else would notice one of them missing a column or an
// index the other has: every query would still work on the store the author
// tried. Both must end with the same tables, columns and indexes.
func TestMigrationsGiveBothDialectsTheSameSchema(t *testing.T) {
	sqlite := readSchema(t, storetest.Open(t, storetest.DSN(t, storetest.SQLite)))
	postgres := readSchema(t, storetest.Open(t, storetest.DSN(t, storetest.Postgres)))

	if len(sqlite.Columns) < 5 || len(sqlite.Indexes) == 0 || len(sqlite.Unique) == 0 || len(sqlite.PrimaryKey) < 5 {
		t.Fatalf("read too little of the SQLite schema to compare: %v", sqlite)
	}
	// One table is SQLite's alone: account_numbers gives each account the
	// number its events and Merkle rows are keyed by (migration 013), where
	// PostgreSQL keys them by the user_id itself (store/account_numbers.go).
	const sqliteOnly = "account_numbers"
	if _, ok := sqlite.Columns[sqliteOnly]; !ok {
		t.Errorf("SQLite has no %s table", sqliteOnly)
	}
	delete(sqlite.Columns, sqliteOnly)
	delete(sqlite.PrimaryKey, sqliteOnly)
	delete(sqlite.Unique, sqliteOnly+"(user_id)")
	// The events' keys are laid out differently. SQLite keeps (account,
	// sequence) and search's keys in tables of their own, built behind the
	// append (migration 039): events_seq and events_tail, which together are
	// PostgreSQL's primary key, row for row, and events_by_type, _tool,
	// _decision, _subagent and _ts, which are PostgreSQL's search indexes
	// (partial on unindexed IS NULL, a column only PostgreSQL's events keep,
	// always NULL there, as its events_unindexed is always empty). Each key
	// table holds its key (the index's columns, and the sequence that makes
	// it unique) and the row's rowid. The dedup key is SQLite's unique index
	// events_event_id (migration 037 rebuilt the table to drop its primary
	// key), PostgreSQL's constraint.
	for table, key := range map[string]struct{ columns, pgIndex string }{
		"events_seq":         {"account,sequence", ""},
		"events_tail":        {"account,sequence", "events_unindexed"},
		"events_by_type":     {"account,event_type,sequence", "events_type"},
		"events_by_tool":     {"account,tool,sequence", "events_tool"},
		"events_by_decision": {"account,decision,sequence", "events_decision"},
		"events_by_subagent": {"account,subagent,sequence", "events_subagent"},
		"events_by_ts":       {"account,ts_micros,sequence", "events_ts"},
	} {
		if got := sqlite.PrimaryKey[table]; got != key.columns {
			t.Errorf("SQLite's %s has the key %q, want %q (migration 039)", table, got, key.columns)
		}
		want := append(strings.Split(key.columns, ","), "rid")
		slices.Sort(want)
		if got := sqlite.Columns[table]; !slices.Equal(got, want) {
			t.Errorf("SQLite's %s has the columns %v, want %v", table, got, want)
		}
		delete(sqlite.Columns, table)
		delete(sqlite.PrimaryKey, table)
		if key.pgIndex == "" {
			continue
		}
		def, ok := postgres.Indexes[key.pgIndex]
		cols := strings.TrimSuffix(strings.TrimPrefix(def, "events("), ") partial")
		if !ok || !strings.HasPrefix(def, "events(") || !strings.HasSuffix(def, ") partial") || !strings.HasPrefix(key.columns+",", cols+",") {
			t.Errorf("PostgreSQL's %s is %q, want a partial index of events on a prefix of %s", key.pgIndex, def, key.columns)
		}
		delete(postgres.Indexes, key.pgIndex)
	}
	postgres.Columns["events"] = slices.DeleteFunc(postgres.Columns["events"], func(c string) bool { return c == "unindexed" })
	if def := sqlite.Indexes["events_event_id"]; def != "events(account,event_id) unique" {
		t.Errorf("SQLite's events_event_id is %q, want the unique index events(account,event_id) (migration 037)", def)
	}
	st := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	for name, says := range map[string]string{
		"events_enter_tail": "AFTER INSERT ON events",
	} {
		var text string
		if err := st.DB().QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = $1`, name).Scan(&text); err != nil || !strings.Contains(text, says) {
			t.Errorf("SQLite's trigger %s: %q (%v), want it to say %q", name, text, err, says)
		}
	}
	if _, ok := sqlite.PrimaryKey["events"]; ok {
		t.Errorf("SQLite's events has a primary key: %s", sqlite.PrimaryKey["events"])
	}
	delete(sqlite.Indexes, "events_event_id")
	sqlite.PrimaryKey["events"] = "account,sequence"
	tables := slices.Sorted(maps.Keys(sqlite.Columns))
	if pg := slices.Sorted(maps.Keys(postgres.Columns)); !slices.Equal(tables, pg) {
		t.Errorf("tables differ:\n sqlite   %v\n postgres %v", tables, pg)
	}
	for _, table := range tables {
		if a, b := sqlite.Columns[table], postgres.Columns[table]; !slices.Equal(a, b) {
			t.Errorf("columns of %s differ:\n sqlite   %s\n postgres %s", table, strings.Join(a, ","), strings.Join(b, ","))
		}
	}
	if !maps.Equal(sqlite.PrimaryKey, postgres.PrimaryKey) {
		t.Errorf("primary keys differ:\n sqlite   %v\n postgres %v", sqlite.PrimaryKey, postgres.PrimaryKey)
	}
	if !maps.Equal(sqlite.Unique, postgres.Unique) {
		t.Errorf("unique column sets differ:\n sqlite   %v\n postgres %v", slices.Sorted(maps.Keys(sqlite.Unique)), slices.Sorted(maps.Keys(postgres.Unique)))
	}
	if !maps.Equal(sqlite.Indexes, postgres.Indexes) {
		t.Errorf("indexes differ:\n sqlite   %v\n postgres %v", sqlite.Indexes, postgres.Indexes)
	}
}

func sqliteIndexColumns(t *testing.T, s *store.Store, index string) string {
	t.Helper()
	var cols []string
	query(t, s, `SELECT name FROM pragma_index_info('`+strings.ReplaceAll(index, "'", "''")+`') ORDER BY seqno`, func(scan func(...any)) {
		var name sql.NullString
		scan(&name)
		if !name.Valid { // a column that is an expression (PostgreSQL's attnum 0)
			name.String = "(expression)"
		}
		cols = append(cols, name.String)
	})
	return strings.Join(cols, ",")
}
