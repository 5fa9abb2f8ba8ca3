// Package applier turns change records of keyed tables (inserts, updates
// and deletes by primary key, each with its version) into containers: one
// sorted container per batch and table, holding the current row of each
// key the batch changed and a delete marker for each key it deleted, with
// the change columns of package columnar (columnar/changes.go). Readers
// and mergeout resolve versions across containers; this package only
// writes them.
package applier
