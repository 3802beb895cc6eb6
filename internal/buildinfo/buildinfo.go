// Package buildinfo is the build's identity for `auditchain version` and GET
// /v1/health: what a release build stamped at link time (deploy/release.sh),
// else what the Go toolchain recorded (module version, VCS revision).
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Set at link time by deploy/release.sh:
//
//	go build -trimpath -ldflags "-X github.com/auditchain/auditchain/internal/buildinfo.version=v1.2.3
//	  -X github.com/auditchain/auditchain/internal/buildinfo.commit=<sha> -X …buildinfo.commitTime=<RFC 3339>"
//
// Each overrides what the toolchain recorded; empty, it does not.
var version, commit, commitTime string

// Info is the build's identity.
type Info struct {
	// Version is the stamped release version, else the main module's version
	// ("v1.2.3"), else "devel" for a build from a work tree (go build, go
	// run), which the toolchain marks "(devel)".
	Version string
	// Revision is the commit the binary was built from: stamped, else the
	// toolchain's VCS record ("" when unknown: go test, -buildvcs=false, a
	// tree without .git). Modified says the work tree had uncommitted changes.
	Revision string
	Time     string
	Modified bool
	Go       string
	// Stamped says a release script set the version at link time.
	Stamped bool
}

// Read returns the running binary's build information.
func Read() Info {
	in := read()
	if version != "" {
		in.Version, in.Stamped = version, true
	}
	if commit != "" {
		in.Revision, in.Modified = commit, false
	}
	if commitTime != "" {
		in.Time = commitTime
	}
	return in
}

func read() Info {
	in := Info{Version: "devel"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	in.Go = bi.GoVersion
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		in.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-word version /v1/health carries: the version, and for a
// development build the short revision ("devel+1a2b3c4d5e6f", with "-dirty"
// when the tree was modified).
func (in Info) String() string {
	s := in.Version
	if in.Version == "devel" && in.Revision != "" {
		s += "+" + in.Revision[:min(12, len(in.Revision))]
		if in.Modified {
			s += "-dirty"
		}
	}
	return s
}

// NoRevision is what `auditchain version` says of a build that recorded no
// commit, so the line still tells how the binary was made.
const NoRevision = "(no commit recorded: built without VCS information or release stamp)"

// Long is `auditchain version`'s line: "auditchain VERSION revision SHA
// built from a commit of TIME GOVERSION", or NoRevision in place of the
// revision and time.
func (in Info) Long() string {
	var b strings.Builder
	b.WriteString("auditchain " + in.Version)
	if in.Revision != "" {
		b.WriteString(" revision " + in.Revision)
		if in.Modified {
			b.WriteString(" (modified)")
		}
	} else {
		b.WriteString(" " + NoRevision)
	}
	if in.Time != "" {
		b.WriteString(" built from a commit of " + in.Time)
	}
	if in.Go != "" {
		b.WriteString(" " + in.Go)
	}
	return b.String()
}
