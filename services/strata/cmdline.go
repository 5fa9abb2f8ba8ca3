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
// them, and the parsing every command shares: flags and STRATA_*
// environment (service.Parse), with the flags anywhere among the
// positional arguments (`strata window 'SELECT ...' --rows 3`,
// `strata jobs record FILE --nats URL`); "--" ends the flags. -h prints
// the usage to stdout; a bad flag or argument is an errUsage.
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

// parse parses args, which must hold only flags.
func (c *cmdLine) parse(args []string) error {
	pos, err := c.parseArgs(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return c.usageError(fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	return nil
}

// parseArgs parses args and returns the positional arguments in order.
func (c *cmdLine) parseArgs(args []string) ([]string, error) {
	if err := service.Parse(c.fs, args); err != nil {
		return nil, err
	}
	return c.fs.Args(), nil
}

// parseArg parses args around the command's one positional argument
// (`strata pools alter tm --memorysize 8GiB`). A missing, blank or second
// argument prints the usage and is an errUsage that says what is wanted.
func (c *cmdLine) parseArg(args []string, want string) (string, error) {
	pos, err := c.parseArgs(args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		return "", c.usageError(want)
	}
	return pos[0], nil
}

// parseFile parses args around exactly one FILE.
func (c *cmdLine) parseFile(args []string) (string, error) {
	return c.parseArg(args, "want one FILE")
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

// parse parses args, which must hold only flags, and checks --format.
func (c *apiCommand) parse(args []string) error {
	if err := c.cmdLine.parse(args); err != nil {
		return err
	}
	return checkFormat(c.format)
}

// parseArgs is cmdLine.parseArgs that also checks --format.
func (c *apiCommand) parseArgs(args []string) ([]string, error) {
	pos, err := c.cmdLine.parseArgs(args)
	if err != nil {
		return nil, err
	}
	return pos, checkFormat(c.format)
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
