package columnar

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
)

// genLabelWords are what the string column's labels are made of: ASCII words
// and numbers, and 2-, 3- and 4-byte UTF-8 (Latin with diacritics, Greek,
// Cyrillic, CJK, Hangul, symbols, emoji and a ZWJ sequence), with an
// apostrophe and a comma among them.
var genLabelWords = []string{
	"order", "cart", "home", "search", "report", "north", "river", "blue", "green", "alpha",
	"delta", "pro", "max", "mini", "v2", "2024", "x", "new", "sale", "page",
	"café", "naïve", "Zürich", "São Paulo", "Kraków", "Straße", "Ærø", "O'Brien", "a,b",
	"Ελλάδα", "Москва", "東京", "日本語", "서울", "€", "½", "🙂", "🚀", "👩‍💻",
}

var genLabelSeparators = []string{" ", " ", " ", "-", "/", "_"}

// GenLabels returns n string values and which of them are NULL, drawn
// from r: a string column of the window benchmarks (bench/ and
// `strata bench window`). They look like the labels of real tables
// (product names, page titles, tags):
//
//   - 5% NULL and 2% the empty string;
//   - 76% from a vocabulary of n/100 labels of 1 to 40 bytes, skewed so that
//     a few labels are frequent and most are rare: PARTITION BY s has
//     partitions from a few percent of the rows down to single rows;
//   - 15% a short label and a number, nearly all distinct;
//   - 2% long labels of 60 to 300 bytes.
//
// Labels are cut at a character boundary, so every value is valid UTF-8 and
// has no NUL byte (PostgreSQL's text cannot hold one).
func GenLabels(n int, r *rand.Rand) (s []string, null []bool) {
	vocab := make([]string, max(16, n/100))
	for i := range vocab {
		vocab[i] = genLabel(r, 1+r.IntN(40))
	}
	s, null = make([]string, n), make([]bool, n)
	for i := range n {
		switch u := r.Float64(); {
		case u < 0.05:
			null[i] = true
		case u < 0.07:
			// the empty string, not NULL
		case u < 0.09:
			s[i] = genLabel(r, 60+r.IntN(241))
		case u < 0.24:
			s[i] = genLabel(r, 1+r.IntN(24)) + " " + strconv.Itoa(r.IntN(1_000_000))
		default:
			v := r.Float64()
			s[i] = vocab[int(float64(len(vocab))*v*v*v)]
		}
	}
	return s, null
}

// genLabel joins random words up to size bytes, cut at a character boundary
// (never to nothing).
func genLabel(r *rand.Rand, size int) string {
	var b strings.Builder
	for b.Len() < size {
		if b.Len() > 0 {
			b.WriteString(genLabelSeparators[r.IntN(len(genLabelSeparators))])
		}
		b.WriteString(genLabelWords[r.IntN(len(genLabelWords))])
	}
	out := b.String()
	if len(out) <= size {
		return out
	}
	cut := size
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	if cut == 0 { // size is inside the first character: keep that character
		_, cut = utf8.DecodeRuneInString(out)
	}
	return out[:cut]
}

// GenCodes returns n fixed-width codes drawn from r, such as a product or
// account code column: "SKU-" and eight digits (12 ASCII bytes, never NULL),
// from a catalog of n/20 codes, skewed so that some codes are frequent. Fixed
// width is a shape of its own: every full block of such a column holds
// exactly as many string bytes as the next.
func GenCodes(n int, r *rand.Rand) []string {
	catalog := make([]string, max(16, n/20))
	for i := range catalog {
		catalog[i] = fmt.Sprintf("SKU-%08d", r.IntN(100_000_000))
	}
	out := make([]string, n)
	for i := range out {
		v := r.Float64()
		out[i] = catalog[int(float64(len(catalog))*v*v)]
	}
	return out
}
