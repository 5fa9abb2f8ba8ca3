package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{name: "cancel", summary: "cancel a job: a queued one never starts, a running one is stopped and its grant freed", run: runCancel})
}

func runCancel(ctx context.Context, args []string) error {
	cmd := newAPICommand("cancel", "usage: strata cancel JOB_ID [--reason TEXT] [flags]\n\n"+
		"Asks the scheduler to cancel a job (a job ID as strata ops lists it). A queued job is\n"+
		"failed at once; a running one's worker is told to stop it, and the job fails with the\n"+
		"reason \"cancelled: TEXT\" once it has (its grant released then); a job that ended is left\n"+
		"as it ended. Prints the job's state: cancelled, cancelling, done or failed.",
		"output format: table, json or csv")
	reason := cmd.fs.String("reason", "", "why, kept in the job's failure reason (default \"by request\")")
	jobID, err := cmd.parseArg(args, "want a JOB_ID")
	if err != nil {
		return err
	}
	if err := messages.ValidName(jobID); err != nil {
		return fmt.Errorf("%w: job ID %q: %v", errUsage, jobID, err)
	}
	var rep messages.CancelReply
	req := &messages.CancelRequest{JobID: jobID, Reason: *reason, RequestID: newRequestID()}
	if err := cmd.ask(ctx, messages.SubjectAPICancel, req, &rep, &rep.Error); err != nil {
		return err
	}
	t := newTable("JOB:job_id", "STATE:state", "REASON:reason")
	t.add(rep.JobID, rep.State, orNil(rep.Reason))
	return t.print(os.Stdout, cmd.format)
}

func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// cancelAbandoned cancels a job its client stopped waiting for (Ctrl-C of
// strata window), on a context of its own: the command's has ended.
func cancelAbandoned(c *apiClient, jobID, what string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rep messages.CancelReply
	err := c.call(ctx, messages.SubjectAPICancel, &messages.CancelRequest{JobID: jobID, Reason: what, RequestID: newRequestID()}, &rep)
	if err == nil {
		err = rep.Error.Err()
	}
	if err != nil {
		fmt.Fprintf(stderr, "job %s not cancelled: %v\n", jobID, err)
		return
	}
	fmt.Fprintf(stderr, "job %s: %s\n", jobID, rep.State)
}
