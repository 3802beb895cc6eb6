package store_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// schemaOf is what the code relies on in a migrated database: its tables with
// their columns, and its explicitly created indexes (CREATE INDEX), each with
// its table and whether it is unique. Types are left out on purpose: the
// dialects spell them differently (INTEGER / BIGINT, BLOB / BYTEA).
type schemaOf struct {
	Columns map[string][]string // table → sorted column names
	Indexes map[string]string   // index name → "table" or "table unique"
}

func readSchema(t *testing.T, s *store.Store) schemaOf {
	t.Helper()
	var q string
	var iq string
	switch s.Dialect {
	case store.SQLite:
		q = `SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`
		iq = `SELECT m.name, m.tbl_name, il."unique" FROM sqlite_master m, pragma_index_list(m.tbl_name) il
			WHERE m.type = 'index' AND m.sql IS NOT NULL AND il.name = m.name`
	default:
		q = `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`
		iq = `SELECT i.relname, t.relname, x.indisunique::int FROM pg_index x
			JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
			JOIN pg_namespace n ON n.oid = t.relnamespace
			WHERE n.nspname = current_schema()
			  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)`
	}
	out := schemaOf{Columns: map[string][]string{}, Indexes: map[string]string{}}
	rows, err := s.DB().Query(q)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			t.Fatal(err)
		}
		out.Columns[table] = append(out.Columns[table], column)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for table := range out.Columns {
		slices.Sort(out.Columns[table])
	}
	rows, err = s.DB().Query(iq)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var index, table string
		var unique int
		if err := rows.Scan(&index, &table, &unique); err != nil {
			t.Fatal(err)
		}
		out.Indexes[index] = table
		if unique == 1 {
			out.Indexes[index] += " unique"
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The dialects keep separate migrations (native SQL where the databases
// differ), so nothing else would notice one of them missing a column or an
// index the other has: every query would still work on the store the author
// tried. Both must end with the same tables, columns and indexes.
func TestMigrationsGiveBothDialectsTheSameSchema(t *testing.T) {
	sqlite := readSchema(t, storetest.Open(t, storetest.DSN(t, storetest.SQLite)))
	postgres := readSchema(t, storetest.Open(t, storetest.DSN(t, storetest.Postgres)))

	if len(sqlite.Columns) < 5 || len(sqlite.Indexes) == 0 {
		t.Fatalf("read too little of the SQLite schema to compare: %v", sqlite)
	}
	tables := slices.Sorted(maps.Keys(sqlite.Columns))
	if pg := slices.Sorted(maps.Keys(postgres.Columns)); !slices.Equal(tables, pg) {
		t.Errorf("tables differ:\n sqlite   %v\n postgres %v", tables, pg)
	}
	for _, table := range tables {
		if a, b := sqlite.Columns[table], postgres.Columns[table]; !slices.Equal(a, b) {
			t.Errorf("columns of %s differ:\n sqlite   %s\n postgres %s", table, strings.Join(a, ","), strings.Join(b, ","))
		}
	}
	if !maps.Equal(sqlite.Indexes, postgres.Indexes) {
		t.Errorf("indexes differ:\n sqlite   %v\n postgres %v", sqlite.Indexes, postgres.Indexes)
	}
}
