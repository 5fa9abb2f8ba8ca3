package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDropMissingContainer: a container deleted behind the catalog's back
// makes every window over its table fail; `strata containers drop` takes
// it out, and the table answers again with the other containers' rows.
func TestDropMissingContainer(t *testing.T) {
	for _, b := range []string{"scheduler", "windower", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.start("windower", "windower-1", "--memory", "512MiB")
	d.cli("load", "--table", "t", "--columns", "4", "--containers", "4", "--rows", "500", "--seed", "5")
	cat := d.catalogOf("t")
	if len(cat.Projections) != 1 || len(cat.Projections[0].Live) != 4 {
		t.Fatalf("catalog after the load: %+v", cat)
	}
	gone := cat.Projections[0].Live[2].ID
	if err := os.RemoveAll(filepath.Join(d.dataDir, "t", "p", gone)); err != nil {
		t.Fatal(err)
	}
	const query = "SELECT k0, count(*) OVER () AS n FROM t"
	if _, errOut, err := d.cliErr("window", "--rows", "1", query); err == nil || !strings.Contains(errOut, gone) {
		t.Fatalf("window over a missing container: err %v, stderr %q; want a failure naming %s", err, errOut, gone)
	}
	if out := d.cli("containers", "--table", "t"); strings.Count(out, " live ") != 4 {
		t.Fatalf("containers before the drop:\n%s", out)
	}
	if out, errOut, err := d.cliErr("containers drop", "t", "nope"); err == nil || !strings.Contains(errOut, "not live") {
		t.Fatalf("drop of an unknown container: err %v, stderr %q, stdout %q", err, errOut, out)
	}
	out := d.cli("containers drop", "t", gone, "--format", "json")
	if !strings.Contains(out, gone) {
		t.Fatalf("drop printed %q", out)
	}
	cat = d.catalogOf("t")
	for _, c := range cat.Projections[0].Live {
		if c.ID == gone {
			t.Fatalf("%s still live: %+v", gone, cat)
		}
	}
	if n := len(cat.Projections[0].Live); n != 3 {
		t.Fatalf("%d live containers after the drop, want 3", n)
	}
	res := d.cli("window", "--rows", "1", "--format", "csv", query)
	if !strings.Contains(res, ",1500") {
		t.Fatalf("window after the drop: %q, want n = 1500", res)
	}
}

// cliErr runs the strata CLI like cli but returns its failure instead of
// failing the test.
func (d *deployment) cliErr(words string, args ...string) (string, string, error) {
	d.t.Helper()
	args = append(append(strings.Fields(words), "--nats", d.nats.ClientURL(), "--data", d.dataDir), args...)
	cmd := exec.Command(filepath.Join(binDir, "strata"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}
