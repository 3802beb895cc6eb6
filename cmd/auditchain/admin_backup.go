package main

// `auditchain admin backup`: an online, consistent copy of a SQLite store
// while serve runs on it; a PostgreSQL store is backed up with pg_dump
// (docs/operations.md "Backup and restore").

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/durable"
	"github.com/auditchain/auditchain/internal/progress"
	"github.com/auditchain/auditchain/internal/store"
)

// adminEnv is what adminCmd hands the admin commands kept in files of their
// own: its context and streams, and its helpers for the --db flag.
type adminEnv struct {
	ctx            context.Context
	getenv         func(string) string
	stdout, stderr io.Writer
	// newAdmin is a command's flags with --db, and the opener of that store.
	newAdmin func(name, synopsis string) (*flag.FlagSet, opener)
	// noArgs parses flags that take no positional argument.
	noArgs func(fs *flag.FlagSet, args []string) error
}

const backupUsage = `usage: auditchain admin backup --to FILE [--force] [--quiet] [--db DSN]

Copies a sqlite: store to FILE, consistently, while serve keeps running on
it (SQLite's VACUUM INTO: one snapshot, no lock on writers). An existing
FILE is refused unless --force. Prints the copy's path and size as JSON; check
the copy with "auditchain admin check --db sqlite:FILE".

A postgres:// store is backed up with pg_dump: the command says how and
exits 1 (docs/operations.md "Backup and restore").
`

// backupResult is what admin backup prints.
type backupResult struct {
	Backup  string `json:"backup"`
	Bytes   int64  `json:"bytes"`
	Seconds string `json:"seconds"`
	Check   string `json:"check"`
}

func (e adminEnv) backup(args []string) error {
	fs, open := e.newAdmin("backup", backupUsage)
	to, force := targetFlags(fs, "file to write the copy to")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	if err := e.noArgs(fs, args); err != nil {
		return err
	}
	a, closeStore, err := openTarget(open, nil, "backup", *to, *force)
	if err != nil {
		return err
	}
	defer closeStore()
	if a.Store.Dialect != store.SQLite {
		return pgDumpHint(a.Store, *to)
	}
	start := time.Now()
	tmp, err := backupTemp(*to)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	line := progress.Start(e.stderr, progress.IsTerminal(e.stderr) && !*quiet,
		progress.Options{Label: "auditchain admin backup", Unit: "MB written"})
	stop := showCopyProgress(line, tmp)
	err = a.Store.BackupTo(e.ctx, tmp)
	stop()
	if err != nil {
		return err
	}
	if err := durable.SyncFile(tmp); err != nil {
		return err
	}
	if err := placeBackup(tmp, *to, *force); err != nil {
		return err
	}
	fi, err := os.Stat(*to)
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(*to)
	return printJSON(e.stdout, backupResult{Backup: abs, Bytes: fi.Size(),
		Seconds: fmt.Sprintf("%.3f", time.Since(start).Seconds()), Check: "auditchain admin check --db " + shellQuote("sqlite:"+abs)})
}

// targetFlags are --to FILE and --force, of a command that writes FILE.
func targetFlags(fs *flag.FlagSet, usage string) (to *string, force *bool) {
	return fs.String("to", "", usage), fs.Bool("force", false, "replace FILE if it exists")
}

// openTarget opens the store of a command that writes --to FILE, once FILE
// is named and may be written.
func openTarget(open opener, deps func(*app.Deps), cmd, to string, force bool) (*adminApp, func(), error) {
	if to == "" {
		return nil, nil, usagef("%s needs --to FILE", cmd)
	}
	if err := refuseExisting(to, force); err != nil {
		return nil, nil, err
	}
	return open(deps)
}

// refuseExisting refuses a target that exists unless told to replace it: a
// backup or pin written over the one before by mistake loses the only copy.
func refuseExisting(path string, force bool) error {
	switch _, err := os.Lstat(path); {
	case err == nil && !force:
		return fmt.Errorf("%s exists: choose another name, or add --force to replace it", path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return nil
}

// pgDumpHint is admin backup's answer on PostgreSQL: the commands that back
// it up and restore it, with the URL's credentials left out.
func pgDumpHint(st *store.Store, to string) error {
	url := st.DBFlag() // 'postgres://…': the --db URL, whose credentials are not printed
	return fmt.Errorf("%w; back it up with\n"+
		"  pg_dump --format=custom --file %s --dbname %s\n"+
		"restore it into an empty database with\n"+
		"  pg_restore --no-owner --dbname %s %s\n"+
		"and check the restored store with\n"+
		"  auditchain admin check --db %s --pin-state PIN\n"+
		"(docs/operations.md \"Backup and restore\")", store.ErrBackupExternal, shellQuote(to), url, url, shellQuote(to), url)
}

// backupTemp names a file beside path that does not exist, for the copy to
// be written to before it takes path's name: a copy cut short never carries
// the backup's name.
func backupTemp(path string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return "", err
	}
	f.Close()
	// VACUUM INTO writes only a file that does not exist.
	return f.Name(), os.Remove(f.Name())
}

// placeBackup gives the finished copy its name (durable.Place), saying what
// to do when the name is taken.
func placeBackup(tmp, to string, force bool) error {
	if err := durable.Place(tmp, to, force); errors.Is(err, durable.ErrExists) {
		return fmt.Errorf("%s exists: choose another name, or add --force to replace it", to)
	} else if err != nil {
		return err
	}
	return nil
}

// showCopyProgress counts on line how much of the copy at path is written,
// each second, until stop is called (which ends the line).
func showCopyProgress(line *progress.Line, path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer line.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var shown int64
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if fi, err := os.Stat(path); err == nil {
					mb := fi.Size() >> 20
					line.Add(mb - shown)
					shown = mb
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// shellQuote is s as one shell word: unchanged when it holds only characters
// no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	if s == "" {
		return "''"
	}
	return s
}
