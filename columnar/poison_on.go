//go:build strata_poison

package columnar

// poisonFreed: built with the strata_poison tag, freed buffers are
// poisoned.
const poisonFreed = true
