package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
)

// cmdLine is a command's flag set: the flags, the text -h prints above
// them, and the parsing every command shares (flags and STRATA_*
// environment, one positional argument given before or after the flags).
type cmdLine struct {
	fs *flag.FlagSet
}

// newCmdLine returns the command line of strata NAME; usage, if not empty,
// is printed above the flags by -h and by a usage error.
func newCmdLine(name, usage string) *cmdLine {
	c := &cmdLine{fs: newFlagSet(name)}
	if usage != "" {
		c.fs.Usage = func() {
			fmt.Fprintln(c.fs.Output(), usage)
			c.fs.PrintDefaults()
		}
	}
	return c
}

// parse parses args and the environment into the flags.
func (c *cmdLine) parse(args []string) error { return service.Parse(c.fs, args) }

// parseArg parses args around the command's one positional argument, which
// may come first (`strata pools alter tm --memorysize 8GiB`) or last. A
// missing or blank argument prints the usage and is an errUsage that says
// what is wanted.
func (c *cmdLine) parseArg(args []string, want string) (string, error) {
	arg, rest := leadingArg(args)
	if err := c.parse(rest); err != nil {
		return "", err
	}
	if arg == "" && c.fs.NArg() == 1 {
		arg = c.fs.Arg(0)
	}
	if strings.TrimSpace(arg) == "" {
		return "", c.usageError(want)
	}
	return arg, nil
}

// parseArgs parses args whose flags may sit anywhere among the positional
// arguments (`strata containers drop t c1 --projection p`), and returns the
// positional ones in order. "--" ends the flags.
func (c *cmdLine) parseArgs(args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := c.fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := c.parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// parseFile parses args, which must end in exactly one FILE.
func (c *cmdLine) parseFile(args []string) (string, error) {
	if err := c.parse(args); err != nil {
		return "", err
	}
	if c.fs.NArg() != 1 {
		return "", c.usageError("want one FILE")
	}
	return c.fs.Arg(0), nil
}

// usageError prints the usage and returns an errUsage saying want.
func (c *cmdLine) usageError(want string) error {
	c.fs.Usage()
	return fmt.Errorf("%w: %s", errUsage, want)
}

// apiCommand is the command line of a command that asks the scheduler and
// prints what it answers: the NATS flags, --request-timeout and --format.
type apiCommand struct {
	*cmdLine
	apiFlags
	format string
}

// formatUsage is the usual help of --format.
const formatUsage = "output format: table, json or csv"

// newAPICommand returns the command line of strata NAME with the scheduler
// flags and --format, described by formatHelp.
func newAPICommand(name, usage, formatHelp string) *apiCommand {
	c := &apiCommand{cmdLine: newCmdLine(name, usage)}
	c.apiFlags.register(c.fs)
	c.fs.StringVar(&c.format, "format", "table", formatHelp)
	return c
}

// parse parses args and checks --format.
func (c *apiCommand) parse(args []string) error {
	if err := c.cmdLine.parse(args); err != nil {
		return err
	}
	return checkFormat(c.format)
}

// parseArg is cmdLine.parseArg that also checks --format.
func (c *apiCommand) parseArg(args []string, want string) (string, error) {
	arg, err := c.cmdLine.parseArg(args, want)
	if err != nil {
		return "", err
	}
	return arg, checkFormat(c.format)
}

// ask dials the scheduler, sends req on subject and decodes the answer into
// rep; it returns the error the scheduler put in the reply, which replyErr
// points to (&rep.Error).
func (c *apiCommand) ask(ctx context.Context, subject string, req, rep messages.Message, replyErr **messages.APIError) error {
	client, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	if err := client.call(ctx, subject, req, rep); err != nil {
		return err
	}
	return (*replyErr).Err()
}
