// Package buildinfo reads what the Go toolchain recorded in the binary (module
// version, VCS revision) for `auditchain version` and GET /v1/health.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is the build's identity.
type Info struct {
	// Version is the main module's version ("v1.2.3"), or "devel" for a build
	// from a work tree (go build, go run), which the toolchain marks "(devel)".
	Version string
	// Revision is the VCS commit the binary was built from ("" when unknown,
	// as under go test); Modified says the work tree had uncommitted changes.
	Revision string
	Time     string
	Modified bool
	Go       string
}

// Read returns the running binary's build information.
func Read() Info {
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

// String is the one-word version /v1/health carries: the module version, and
// for a development build the short revision ("devel+1a2b3c4d5e6f", with
// "-dirty" when the tree was modified).
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

// Long is `auditchain version`'s line.
func (in Info) Long() string {
	var b strings.Builder
	b.WriteString("auditchain " + in.Version)
	if in.Revision != "" {
		b.WriteString(" revision " + in.Revision)
		if in.Modified {
			b.WriteString(" (modified)")
		}
	}
	if in.Time != "" {
		b.WriteString(" built from a commit of " + in.Time)
	}
	if in.Go != "" {
		b.WriteString(" " + in.Go)
	}
	return b.String()
}
