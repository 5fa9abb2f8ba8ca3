package service

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// buildVersion, when set at link time, is the version Version reports.
var buildVersion string

// Version returns what `NAME --version` prints: the module version, the
// VCS commit and time the binary was built from (with "+dirty" when the
// work tree had changes), and the Go version, as the build recorded them
// (runtime/debug.ReadBuildInfo). A binary built without module or VCS
// information says "unknown" for what it lacks:
//
//	scheduler version v0.3.1 commit 822f5c0d1e2a+dirty (2026-12-01T22:10:00Z) go1.24.1 linux/amd64
func Version(name string) string {
	version, commit, when, dirty := "unknown", "unknown", "", false
	goVersion := runtime.Version()
	if info, ok := debug.ReadBuildInfo(); ok {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			version = v
		} else if v == "(devel)" {
			version = "devel"
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
				if len(commit) > 12 {
					commit = commit[:12]
				}
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if buildVersion != "" {
		version = buildVersion
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s version %s commit %s", name, version, commit)
	if dirty {
		b.WriteString("+dirty")
	}
	if when != "" {
		fmt.Fprintf(&b, " (%s)", when)
	}
	fmt.Fprintf(&b, " %s %s/%s", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
