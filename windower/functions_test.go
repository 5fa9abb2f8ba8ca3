package windower

import (
	"testing"

	"github.com/strata-db/strata/messages"
)

// TestFunctionsMatchWire checks that the windower's function table and
// the wire's list (package messages) name the same functions with the
// same arities, and agree on which are aggregates.
func TestFunctionsMatchWire(t *testing.T) {
	for f := fn(0); f < numFuncs; f++ {
		info := f.info()
		if info.name == "" || info.result == nil || info.eval == nil {
			t.Errorf("function %d: incomplete table entry %+v", f, info)
			continue
		}
		lo, hi, ok := messages.WindowFuncArity(info.name)
		if !ok {
			t.Errorf("%s: not a window function on the wire", info.name)
			continue
		}
		if lo != info.minArgs || hi != info.maxArgs {
			t.Errorf("%s: wire takes %d to %d arguments, the windower %d to %d", info.name, lo, hi, info.minArgs, info.maxArgs)
		}
		if messages.IsAggregate(info.name) != f.isAggregate() {
			t.Errorf("%s: wire says aggregate %v, the windower %v", info.name, messages.IsAggregate(info.name), f.isAggregate())
		}
	}
	for _, name := range messages.WindowFuncNames() {
		if _, ok := fnByName[name]; !ok {
			t.Errorf("%s: on the wire but not in the windower's table", name)
		}
	}
	if got, want := len(fnByName), int(numFuncs); got != want {
		t.Errorf("%d names for %d functions: a name is used twice", got, want)
	}
}
