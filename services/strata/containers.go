package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{name: "containers", summary: "the containers table: every live and dead container of each projection", run: runContainers})
	register(command{name: "containers drop", summary: "take containers out of a projection (one that is missing or damaged)", run: runContainersDrop})
}

func runContainers(ctx context.Context, args []string) error {
	cmd := newAPICommand("containers", "usage: strata containers [--table T] [--projection P]\n"+
		"       strata containers --store URL [--table T] [--projection P]\n\n"+
		"Lists the containers the scheduler's catalog names, live and dead, with their rows; a keyed\n"+
		"table's primary key heads the list (csv and json: the primary_key column); with --store, what\n"+
		"the store (a bucket) holds instead, without NATS: every upload attempt of each\n"+
		"container, committed or not (an upload in flight, or one left behind), with its\n"+
		"objects, bytes and newest modification time.", formatUsage)
	tableName := cmd.fs.String("table", "", "only this table")
	projection := cmd.fs.String("projection", "", "only this projection")
	storeURL := cmd.fs.String("store", "", "list what this store holds (s3://BUCKET/PREFIX?endpoint=URL, file:///DIR) instead of the catalog")
	pos, err := cmd.parseArgs(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmd.usageError(fmt.Sprintf("unexpected argument %q (to drop containers: strata containers drop TABLE CONTAINER...)", pos[0]))
	}
	if *storeURL != "" {
		for _, n := range []string{*tableName, *projection} {
			if n != "" && messages.ValidName(n) != nil {
				return fmt.Errorf("%w: %v", errUsage, messages.ValidName(n))
			}
		}
		return listBucket(ctx, *storeURL, *tableName, *projection, cmd.format, !service.FlagInArgs(args, "store"))
	}
	var rep messages.CatalogReply
	if err := cmd.ask(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: *tableName, Projection: *projection}, &rep, &rep.Error); err != nil {
		return err
	}
	return printContainers(os.Stdout, rep.Projections, currentRows(ctx, cmd.common.DataDir, rep.Projections), cmd.format)
}

// currentRows resolves the versions of each keyed projection's live
// containers in the data directory (columnar.Superseded, as a query
// does): by container ID, how many of its rows are current. A projection
// whose containers cannot be read here (another host's data directory, a
// bucket) is left out and shows no figure.
func currentRows(ctx context.Context, dataDir string, pcs []messages.ProjectionCatalog) map[string]int64 {
	out := map[string]int64{}
	for _, pc := range pcs {
		if len(pc.PrimaryKey) == 0 || len(pc.Live) == 0 {
			continue
		}
		var cs []*columnar.Container
		for _, c := range pc.Live {
			ct, err := columnar.Open(columnar.ContainerDir(dataDir, c.Table, c.Projection, c.ID), columnar.OpenOptions{})
			if err != nil {
				cs = nil
				break
			}
			cs = append(cs, ct)
		}
		if cs == nil {
			continue
		}
		res, err := columnar.Superseded(ctx, cs, columnar.ResolveOptions{})
		if err != nil {
			continue
		}
		for i, c := range pc.Live {
			n := c.Rows
			if d := res.Dropped[i]; d != nil {
				n -= int64(d.GetCardinality())
			}
			out[pc.Table+"/"+pc.Projection+"/"+c.ID] = n
		}
	}
	return out
}

// printContainers writes the containers table. In the aligned table a
// keyed table's primary key heads the list, a line per keyed projection;
// CSV and JSON, which have no such lines, carry it in a column.
//
// For a live container of a keyed table, current is how many of its rows
// a query sees now (current[table/projection/id]): the others are
// superseded by newer versions of their keys, or delete markers.
func printContainers(w io.Writer, pcs []messages.ProjectionCatalog, current map[string]int64, format string) error {
	machine := format == "csv" || format == "json"
	cols := []string{"table", "projection", "container", "state", "rows", "current", "bytes", "jobs"}
	if machine {
		cols = append(cols, "primary key:primary_key")
	}
	t := newTable(cols...)
	for _, pc := range pcs {
		if len(pc.PrimaryKey) > 0 && !machine {
			fmt.Fprintf(w, "%s.%s: primary key (%s)\n", pc.Table, pc.Projection, strings.Join(pc.PrimaryKey, ", "))
		}
		jobs := textCell(strings.Join(pc.Running, " "))
		for _, set := range []struct {
			state string
			refs  []messages.ContainerRef
		}{{"live", pc.Live}, {"dead", pc.Dead}} {
			for _, c := range set.refs {
				cur := textCell("")
				if n, ok := current[pc.Table+"/"+pc.Projection+"/"+c.ID]; ok && set.state == "live" {
					cur = textCell(fmt.Sprint(n))
				}
				row := []any{pc.Table, pc.Projection, c.ID, set.state, c.Rows, cur, sizeCell(c.Bytes), jobs}
				if machine {
					row = append(row, textCell(strings.Join(pc.PrimaryKey, ",")))
				}
				t.add(row...)
			}
		}
	}
	return t.print(w, format)
}

func runContainersDrop(ctx context.Context, args []string) error {
	cmd := newAPICommand("containers drop", "usage: strata containers drop TABLE CONTAINER... [--projection P]\n\n"+
		"Takes the containers out of the projection's live set: their rows leave the\n"+
		"table, and their files are deleted once no running job reads them. For a\n"+
		"container that is missing or damaged (every job reading it fails); list\n"+
		"them with `strata containers --table TABLE`.", formatUsage)
	projection := cmd.fs.String("projection", "p", "projection the containers belong to")
	pos, err := cmd.parseArgs(args)
	if err != nil {
		return err
	}
	if err := checkFormat(cmd.format); err != nil {
		return err
	}
	if len(pos) < 2 {
		return cmd.usageError("want the TABLE and at least one CONTAINER")
	}
	tableName, ids := pos[0], pos[1:]
	req := &messages.DropContainersRequest{Table: tableName, Projection: *projection, IDs: ids, RequestID: newRequestID()}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var rep messages.DropContainersReply
	if err := cmd.ask(ctx, messages.SubjectAPIDropContainers, req, &rep, &rep.Error); err != nil {
		return err
	}
	t := newTable("table", "projection", "container", "rows", "bytes")
	for _, c := range rep.Dropped {
		t.add(c.Table, c.Projection, c.ID, c.Rows, sizeCell(c.Bytes))
	}
	if err := t.print(os.Stdout, cmd.format); err != nil {
		return err
	}
	if cmd.format == "table" {
		fmt.Fprintf(os.Stderr, "dropped %d containers from %s.%s; %d live\n", len(rep.Dropped), tableName, *projection, rep.Live)
	}
	return nil
}
