package columnar

// Poisoning freed memory.
//
// A value that still points into a buffer after the buffer went back to
// its allocator reads whatever the next user wrote there: usually data of
// the same shape, so the wrong answer looks right. Built with the
// strata_poison tag, Budget (and the windower's block recycler) overwrite
// every buffer they take back with PoisonByte before it is freed or handed
// out again, so such a value reads as 0xA5 bytes (invalid UTF-8, huge
// integers) at once. `make test` runs the engine suites this way; it costs
// a pass over every freed byte, so release builds leave it off.

// PoisonByte is the pattern freed buffers are overwritten with.
const PoisonByte = 0xA5

// Poison overwrites b with PoisonByte when built with the strata_poison
// tag, and does nothing otherwise.
func Poison(b []byte) {
	if !poisonFreed {
		return
	}
	for i := range b {
		b[i] = PoisonByte
	}
}
