package windower

// Partition and peer group boundaries of sorted key columns.

// markChanges sets flags[i] for every row i in [lo, hi), i >= 1, whose
// value in v differs from row i-1 (NULLs equal each other). Other flags
// are left alone, so calling it for several keys marks a change in any of
// them.
func markChanges(v *vector, flags []bool, lo, hi int) {
	n := hi
	lo = max(lo, 1)
	if nulls := v.nulls; nulls != nil {
		for i := lo; i < n; i++ {
			if nulls[i] != nulls[i-1] || (!nulls[i] && compareValues(v, i, i-1, false) != 0) {
				flags[i] = true
			}
		}
		return
	}
	switch v.kind {
	case kindFloat:
		x := v.floats
		for i := lo; i < n; i++ {
			if compareFloat(x[i], x[i-1]) != 0 {
				flags[i] = true
			}
		}
	case kindString:
		x := v.strs
		for i := lo; i < n; i++ {
			if x[i] != x[i-1] {
				flags[i] = true
			}
		}
	default:
		x := v.ints
		for i := lo; i < n; i++ {
			if x[i] != x[i-1] {
				flags[i] = true
			}
		}
	}
}

// flagStarts returns the rows i where flags[i] is set, and row 0, then
// len(flags), in dst's storage when it is large enough, with each row's
// number of starts at or before it, less one, in groupOf when groupOf is
// not nil (a row's peer group from peer-change flags). It runs on up to
// threads goroutines, over ranges of rows.
func flagStarts(flags []bool, dst, groupOf []int32, threads int) []int32 {
	n := len(flags)
	if threads < 1 || n < parallelMinRows {
		threads = 1
	}
	ranges := splitRows(n, threads)
	counts := make([]int, len(ranges)+1)
	parallelFor(len(ranges), func(r int) {
		c := 0
		for _, f := range flags[ranges[r][0]:ranges[r][1]] {
			if f {
				c++
			}
		}
		if ranges[r][0] == 0 && !flags[0] {
			c++ // row 0 starts one
		}
		counts[r] = c
	})
	total := 0
	for r := range ranges {
		total, counts[r] = total+counts[r], total
	}
	dst = grow(dst, total+1)
	dst[total] = int32(n)
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		at := counts[r]
		out := dst[:total]
		if groupOf == nil {
			for i, f := range flags[lo:hi] {
				if f || lo+i == 0 {
					out[at] = int32(lo + i)
					at++
				}
			}
			return
		}
		ofs := groupOf[lo:hi]
		for i, f := range flags[lo:hi] {
			if f || lo+i == 0 {
				out[at] = int32(lo + i)
				at++
			}
			ofs[i] = int32(at - 1)
		}
	})
	return dst
}
