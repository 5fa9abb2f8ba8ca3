//go:build !strata_poison

package columnar

// poisonFreed: built without the strata_poison tag, freed buffers are
// left as they are.
const poisonFreed = false
