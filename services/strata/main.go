// Command strata is the command-line client of a strata deployment: it loads
// tables and exports them, asks for mergeouts and window queries, publishes
// update events, prints the system tables and the dead letters, records and
// replays job streams, inspects WAL directories, and runs the benchmarks.
//
// Usage:
//
//	strata COMMAND [SUBCOMMAND] [ARGUMENTS] [flags]
//
// Run `strata help` for the list of commands, `strata GROUP -h` for a
// group's subcommands (`strata wal -h`), `strata COMMAND -h` for a
// command's flags (on stdout), `strata --version` for the version. Flags
// may sit before, between or after the arguments; "--" ends them. Every
// flag --some-name is also the environment variable STRATA_SOME_NAME.
//
// Exit status: 0 on success, -h and --version; 1 when the command failed
// (a query that does not parse, a refusal from the scheduler, a damaged
// WAL); 2 for a usage error (unknown command or flag, bad flag value,
// missing or extra argument), printed with the usage on stderr.
//
// Output: the system tables (ops, pools, acquisitions, containers,
// deadletter) print with --format table (for people: human units, "-"
// for nothing, control characters escaped), csv (plain numbers — bytes,
// seconds, RFC 3339 times — and the empty field for nothing) or json (an
// array of objects with snake_case keys in column order and typed values,
// null for nothing); see table in output.go. The rows of a window result
// print as a table, as CSV (a header even without rows, NULL empty) or as
// JSON lines of typed values (convert.AppendJSONRow). strata export and
// window --out write files with columnar/convert.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/strata-db/strata/internal/service"
)

// command is one CLI command, such as "load" or "bench mergeout".
type command struct {
	name    string // words as typed: "bench mergeout"
	summary string
	// run parses args (the words after the name) and does the work.
	run func(ctx context.Context, args []string) error
}

// commands is filled by the register calls in each command's file.
var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("strata: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// groups holds what `strata GROUP -h` prints above the list of a command
// group's subcommands ("wal": the wal dump, verify, ... commands).
var groups = map[string]string{}

func registerGroup(name, doc string) { groups[name] = doc }

// isGroup reports whether name is the first word of some command.
func isGroup(name string) bool {
	for n := range commands {
		if strings.HasPrefix(n, name+" ") {
			return true
		}
	}
	return false
}

// groupUsage prints the subcommands of group to w.
func groupUsage(w io.Writer, group string) {
	fmt.Fprintf(w, "usage: strata %s SUBCOMMAND [ARGUMENTS] [flags]\n", group)
	if doc := groups[group]; doc != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(doc))
	}
	fmt.Fprintln(w, "\nsubcommands:")
	var names []string
	for n := range commands {
		if strings.HasPrefix(n, group+" ") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-20s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun `strata %s SUBCOMMAND -h` for a subcommand's flags.\n", group)
}

// errUsage marks an error the user fixes by changing the command line:
// strata exits 2 on it, and 1 on any other failure.
var errUsage = service.ErrUsage

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(dispatch(ctx, os.Args[1:]))
}

// dispatch runs the command args name and returns the exit status: 0 on
// success, on -h and on --version; 1 when the command failed; 2 on a usage
// error, an unknown command or none.
func dispatch(ctx context.Context, args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(os.Stdout)
		return 0
	case "help":
		if len(args) == 1 {
			usage(os.Stdout)
			return 0
		}
		// strata help COMMAND is strata COMMAND -h.
		args = append(append([]string{}, args[1:]...), "-h")
	case "-version", "--version", "version":
		fmt.Println(service.Version("strata"))
		return 0
	}
	// Longest match first: "bench mergeout" before "bench".
	for n := min(2, len(args)); n >= 1; n-- {
		name := strings.Join(args[:n], " ")
		c, ok := commands[name]
		if !ok {
			continue
		}
		err := c.run(ctx, args[n:])
		code := service.ExitCode(err)
		if code != 0 {
			fmt.Fprintf(os.Stderr, "strata %s: %v\n", name, err)
		}
		return code
	}
	if isGroup(args[0]) {
		// strata wal -h lists the wal subcommands.
		if len(args) == 2 && (args[1] == "-h" || args[1] == "-help" || args[1] == "--help") {
			groupUsage(os.Stdout, args[0])
			return 0
		}
		if len(args) > 1 {
			fmt.Fprintf(os.Stderr, "strata: unknown command %q\n\n", strings.Join(args[:2], " "))
		}
		groupUsage(os.Stderr, args[0])
		return 2
	}
	fmt.Fprintf(os.Stderr, "strata: unknown command %q\n\n", strings.Join(args[:min(2, len(args))], " "))
	usage(os.Stderr)
	return 2
}

// usage prints the list of commands to w.
func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: strata COMMAND [ARGUMENTS] [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-20s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `strata COMMAND -h` (or `strata help COMMAND`) for a command's flags, `strata --version` for the version.")
	fmt.Fprintln(w, "Flags may come before or after the arguments; every flag --some-name is also STRATA_SOME_NAME.")
}

// newFlagSet returns a flag set for a command that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("strata "+name, flag.ContinueOnError)
	return fs
}
