// Command strata is the command-line client of a strata deployment: it loads
// tables, asks for mergeouts and window queries, publishes update events,
// prints the system tables, records and replays job streams, inspects WAL
// directories, and runs the benchmarks.
//
// Usage:
//
//	strata COMMAND [SUBCOMMAND] [flags]
//
// Run `strata help` for the list of commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
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

// errUsage marks an error the user fixes by changing the command line.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(dispatch(ctx, os.Args[1:]))
}

func dispatch(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage()
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
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(os.Stderr, "strata %s: %v\n", name, err)
			return 2
		default:
			fmt.Fprintf(os.Stderr, "strata %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "strata: unknown command %q\n\n", strings.Join(args[:min(2, len(args))], " "))
	usage()
	return 2
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: strata COMMAND [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-20s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun `strata COMMAND -h` for a command's flags.")
}

// newFlagSet returns a flag set for a command that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("strata "+name, flag.ContinueOnError)
	return fs
}
