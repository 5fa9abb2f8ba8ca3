package depot

// crcCombine returns the CRC-32C of a then b, given crcA (of a), crcB (of
// b) and the length of b: the depot sums each segment of a column file as
// it streams in, in whatever order the segments come, and checks the
// file against its manifest's CRC-32C by combining the segments' sums, so
// completing a file reads nothing back. It is zlib's crc32_combine for
// the Castagnoli polynomial: crcA times x^(8·lenB) modulo the polynomial,
// plus crcB, in the reflected bit order hash/crc32 uses.
func crcCombine(crcA, crcB uint32, lenB int64) uint32 {
	return multModP(xPow8N(lenB), crcA) ^ crcB
}

// castagnoliReflected is the Castagnoli polynomial, bits reflected
// (crc32.Castagnoli).
const castagnoliReflected = 0x82f63b78

// multModP returns a(x)·b(x) modulo the polynomial, both reflected (the
// bit 1<<31 is x^0).
func multModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow2K holds x^(2^k) modulo the polynomial, reflected, for k < 64.
var xPow2K = func() (t [64]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = multModP(t[k-1], t[k-1])
	}
	return t
}()

// xPow8N returns x^(8n) modulo the polynomial, reflected: shifting a CRC
// over n zero bytes.
func xPow8N(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = multModP(xPow2K[k], p)
		}
	}
	return p
}
