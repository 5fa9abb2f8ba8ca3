package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-db/strata/messages"
)

// apiFaultEnv names the test failpoint of the API server: faults between
// carrying a request out and replying to it, the window in which a client
// cannot know the outcome. The integration tests set it; nothing else
// should. Its value is OP:FAULT[,FAULT...], OP the request's subject
// without "strata.api." (register, window, containers.drop, ...):
//
//	delay=D   reply D (a Go duration) late, to every such request
//	drop=N    send no reply to the first N such requests
//	exit      exit the process (status 3) instead of replying to the first
//	          such request: a scheduler killed between its catalog write
//	          and its reply
const apiFaultEnv = "STRATA_TEST_API_FAULT"

// apiFault is a parsed failpoint; a nil *apiFault injects nothing.
type apiFault struct {
	subject string
	delay   time.Duration
	exit    bool

	mu   sync.Mutex
	drop int
}

func parseAPIFault(s string) (*apiFault, error) {
	if s == "" {
		return nil, nil
	}
	op, faults, ok := strings.Cut(s, ":")
	if !ok || op == "" || faults == "" {
		return nil, fmt.Errorf("%q: want OP:FAULT[,FAULT...]", s)
	}
	f := &apiFault{subject: messages.SubjectAPIPrefix + op}
	for _, fault := range strings.Split(faults, ",") {
		name, arg, _ := strings.Cut(fault, "=")
		var err error
		switch name {
		case "delay":
			f.delay, err = time.ParseDuration(arg)
		case "drop":
			f.drop, err = strconv.Atoi(arg)
		case "exit":
			f.exit = true
		default:
			err = fmt.Errorf("unknown fault")
		}
		if err != nil {
			return nil, fmt.Errorf("%q: fault %q: %v", s, fault, err)
		}
	}
	return f, nil
}

// beforeReply injects the fault for a request on subject, whose answer is
// decided (and stored) but not yet sent; it reports whether to reply.
func (f *apiFault) beforeReply(subject string, log *slog.Logger) bool {
	if f == nil || subject != f.subject {
		return true
	}
	if f.exit {
		log.Warn("test failpoint: exiting before the reply", "subject", subject)
		os.Exit(3)
	}
	f.mu.Lock()
	drop := f.drop > 0
	if drop {
		f.drop--
	}
	f.mu.Unlock()
	if drop {
		log.Warn("test failpoint: reply dropped", "subject", subject)
		return false
	}
	time.Sleep(f.delay)
	return true
}
