package storetest

import (
	"database/sql"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// Without AUDITCHAIN_TEST_POSTGRES the PostgreSQL half is skipped (not
// passed), with a message naming the variable: what `go test -v` shows and
// the README tells readers to look for (a plain `go test ./...` prints only
// "ok" for a passing package, so the README does not promise more).
func TestPostgresIsSkippedSayingHow(t *testing.T) {
	t.Setenv(PostgresEnv, "")
	var ran []string
	Each(t, func(t *testing.T, dsn string) { ran = append(ran, strings.SplitN(dsn, ":", 2)[0]) })
	if len(ran) != 1 || ran[0] != "sqlite" {
		t.Fatalf("ran on %v, want sqlite only", ran)
	}
	rec := &skipRecorder{TB: t}
	func() {
		defer func() { recover() }() // SkipNow's Goexit is replaced by a panic below
		DSN(rec, Postgres)
	}()
	if !strings.Contains(rec.msg, "PostgreSQL tests skipped") || !strings.Contains(rec.msg, PostgresEnv) {
		t.Fatalf("skip message %q, want it to say PostgreSQL tests skipped and name %s", rec.msg, PostgresEnv)
	}
}

// skipRecorder records a Skip's message instead of skipping the test.
type skipRecorder struct {
	testing.TB
	msg string
}

func (r *skipRecorder) Skip(args ...any) {
	for _, a := range args {
		r.msg += a.(string)
	}
	panic("skipped")
}
func (r *skipRecorder) Helper() {}

// DSN's database already holds the schema the migrations build, before any
// store opens it, and nothing else; EmptyDSN's holds nothing. What the
// template gives is what migrating an empty database gives: the same tables,
// columns, indexes and constraints, and every migration recorded.
func TestDSNHoldsWhatMigratingAnEmptyDatabaseGives(t *testing.T) {
	for _, b := range []Backend{SQLite, Postgres} {
		t.Run(string(b), func(t *testing.T) {
			copied := DSN(t, b)
			if got := schemaOf(t, copied); len(got) == 0 {
				t.Fatalf("DSN gave a database without a schema")
			}
			empty := EmptyDSN(t, b)
			if got := schemaOf(t, empty); len(got) != 0 {
				t.Fatalf("EmptyDSN gave a database with %v", got)
			}
			Open(t, empty) // applies every migration
			if want, got := schemaOf(t, empty), schemaOf(t, copied); !slices.Equal(got, want) {
				t.Fatalf("the copied schema differs from a migrated one:\n got  %q\n want %q", got, want)
			}
			if want, got := versionsOf(t, empty), versionsOf(t, copied); len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("migrations recorded: %v in the copy, %v when migrated", got, want)
			}
			// Each copy is a database of its own.
			other := DSN(t, b)
			exec(t, copied, `CREATE TABLE only_in_one (x INTEGER)`)
			if slices.Equal(schemaOf(t, other), schemaOf(t, copied)) {
				t.Fatal("a table created in one copy shows in another")
			}
		})
	}
}

// Test binaries that start at once on a server without the template all get
// it: one builds it, and no half-built copy is left behind.
func TestPostgresTemplateBuiltOnceByBinariesAtOnce(t *testing.T) {
	admin, u := adminDB(t)
	name := randomName("ac_tmpl_test_")
	t.Cleanup(func() { dropTemplate(t, admin, name) })
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			db, err := sql.Open("pgx", u.String())
			if err == nil {
				defer db.Close()
				err = ensureTemplate(db, u, name)
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var templates, leftovers int
	if err := admin.QueryRow(`SELECT count(*) FILTER (WHERE datname = $1 AND datistemplate AND NOT datallowconn),
		count(*) FILTER (WHERE starts_with(datname, $1 || '_')) FROM pg_database`, name).Scan(&templates, &leftovers); err != nil {
		t.Fatal(err)
	}
	if templates != 1 || leftovers != 0 {
		t.Fatalf("%d templates refusing connections (want 1), %d half-built copies left (want 0)", templates, leftovers)
	}
}

// A PostgreSQL template dropped while a test binary uses it (an operator
// tidying the server) is built again by the next DSN.
func TestPostgresTemplateDroppedIsBuiltAgain(t *testing.T) {
	admin, _ := adminDB(t)
	defer func(prefix string) {
		pgTmpl.mu.Lock()
		templatePrefix, pgTmpl.name = prefix, ""
		pgTmpl.mu.Unlock()
	}(templatePrefix)
	pgTmpl.mu.Lock()
	templatePrefix, pgTmpl.name = randomName("ac_tmpl_test_")+"_", ""
	pgTmpl.mu.Unlock()
	DSN(t, Postgres)
	name := pgTmpl.name
	if name == "" {
		t.Fatal("DSN built no template")
	}
	t.Cleanup(func() { dropTemplate(t, admin, name) })
	dropTemplate(t, admin, name)
	if got := schemaOf(t, DSN(t, Postgres)); len(got) == 0 {
		t.Fatal("DSN after the template was dropped gave a database without a schema")
	}
	var n int
	if err := admin.QueryRow(`SELECT count(*) FROM pg_database WHERE datname = $1 AND datistemplate AND NOT datallowconn`, name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("template %s after the rebuild: %d rows (%v), want one template refusing connections", name, n, err)
	}
}

// adminDB connects to the server of AUDITCHAIN_TEST_POSTGRES (or skips).
func adminDB(t *testing.T) (*sql.DB, *url.URL) {
	t.Helper()
	admin := adminURL(t)
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, u
}

func dropTemplate(t *testing.T, admin *sql.DB, name string) {
	t.Helper()
	for _, q := range []string{"ALTER DATABASE " + name + " WITH IS_TEMPLATE false", "DROP DATABASE " + name} {
		if _, err := admin.Exec(q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// schemaOf lists dsn's tables, columns, indexes and constraints, sorted,
// read without the store (whose opening would migrate).
func schemaOf(t *testing.T, dsn string) []string {
	t.Helper()
	var q string
	if strings.HasPrefix(dsn, "sqlite:") {
		q = `SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master`
	} else {
		q = `SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
			FROM information_schema.columns WHERE table_schema = 'public'
			UNION ALL SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
			UNION ALL SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
			FROM pg_constraint WHERE connamespace = 'public'::regnamespace
			UNION ALL SELECT 'function ' || proname || ' ' || md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
			UNION ALL SELECT 'trigger ' || tgrelid::regclass::text || ' ' || tgname FROM pg_trigger WHERE NOT tgisinternal`
	}
	out := column[string](t, dsn, q)
	slices.Sort(out)
	return out
}

func versionsOf(t *testing.T, dsn string) []int64 {
	t.Helper()
	return column[int64](t, dsn, `SELECT version FROM schema_migrations ORDER BY version`)
}

// column runs q on dsn and returns its one column.
func column[T any](t *testing.T, dsn, q string) []T {
	t.Helper()
	rows, err := rawDB(t, dsn).Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func exec(t *testing.T, dsn, q string) {
	t.Helper()
	if _, err := rawDB(t, dsn).Exec(q); err != nil {
		t.Fatal(err)
	}
}

// rawDB connects to dsn with the drivers the store registers, closed when
// the test ends.
func rawDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	driver, source := "pgx", dsn
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		driver, source = "sqlite", path
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
