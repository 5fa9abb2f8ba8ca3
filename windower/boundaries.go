package windower

// Partition and peer group boundaries of sorted key columns.

// markChanges sets flags[i] for every row i >= 1 whose value in v differs
// from row i-1 (NULLs equal each other). Other flags are left alone, so
// calling it for several keys marks a change in any of them.
func markChanges(v *vector, flags []bool) {
	n := v.len()
	if nulls := v.nulls; nulls != nil {
		for i := 1; i < n; i++ {
			if nulls[i] != nulls[i-1] || (!nulls[i] && compareValues(v, i, i-1, false) != 0) {
				flags[i] = true
			}
		}
		return
	}
	switch v.kind {
	case kindFloat:
		x := v.floats
		for i := 1; i < n; i++ {
			if compareFloat(x[i], x[i-1]) != 0 {
				flags[i] = true
			}
		}
	case kindString:
		x := v.strs
		for i := 1; i < n; i++ {
			if x[i] != x[i-1] {
				flags[i] = true
			}
		}
	default:
		x := v.ints
		for i := 1; i < n; i++ {
			if x[i] != x[i-1] {
				flags[i] = true
			}
		}
	}
}
