package windower

// RANGE offsets on date and timestamp keys are intervals: months, days
// and microseconds (messages.Interval). PostgreSQL finds a frame bound as
// key - offset (PRECEDING) or key + offset (FOLLOWING), reversed for DESC,
// with timestamp + interval: the months first, keeping the day of the
// month unless the new month is shorter (2024-01-31 + 1 month =
// 2024-02-29), then the days, then the microseconds; a date is first
// made a timestamp at midnight. Time zones play no part: a timestamp with
// one is taken in UTC, so a day is always 24 hours.
//
// Without months the offset is a constant in the key's unit, kept as
// its whole units and whether a fraction remains (half a day on a date):
// the bound then lies between two keys, and a key is compared with it
// exactly. With months the bound is computed for every row
// (calendarOffset.target).
//
// Adding months is monotonic but not strictly so: 2024-01-30 23:00 and
// 2024-01-31 01:00 plus a month are 2024-02-29 23:00 and 01:00. The
// framer's cursors only move forward, as PostgreSQL's frame head and tail
// do, so such rows get PostgreSQL's frames.

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/messages"
)

// temporalUnit is how a date or timestamp key counts time.
type temporalUnit struct {
	perDay int64 // units in a day
	// microsPerUnit is the unit in microseconds; 0 for nanoseconds.
	microsPerUnit int64
}

func temporalUnitOf(t arrow.DataType) (temporalUnit, bool) {
	switch t.ID() {
	case arrow.DATE32:
		return temporalUnit{perDay: 1, microsPerUnit: 86400e6}, true
	case arrow.TIMESTAMP:
		switch t.(*arrow.TimestampType).Unit {
		case arrow.Second:
			return temporalUnit{perDay: 86400, microsPerUnit: 1e6}, true
		case arrow.Millisecond:
			return temporalUnit{perDay: 86400e3, microsPerUnit: 1e3}, true
		case arrow.Microsecond:
			return temporalUnit{perDay: 86400e6, microsPerUnit: 1}, true
		case arrow.Nanosecond:
			return temporalUnit{perDay: 86400e9}, true
		}
	}
	return temporalUnit{}, false
}

// intervalBound compiles an interval offset (not negative by PostgreSQL's
// measure) on a key of unit u into b.
func intervalBound(b *bound, iv messages.Interval, u temporalUnit) error {
	if iv.Sign() < 0 {
		return fmt.Errorf("invalid preceding or following size in window function")
	}
	if iv.Months != 0 {
		b.cal = &calendarOffset{iv: iv, unit: u}
		return nil
	}
	// days*24h + micros (at least 0) in the key's unit: whole units and
	// whether a fraction remains.
	total := new(big.Int).Mul(big.NewInt(int64(iv.Days)), big.NewInt(86400e6))
	total.Add(total, big.NewInt(iv.Micros))
	if u.microsPerUnit == 0 {
		total.Mul(total, big.NewInt(1000))
	} else {
		var rem big.Int
		total.DivMod(total, big.NewInt(u.microsPerUnit), &rem) // Euclidean
		b.offFrac = rem.Sign() != 0
	}
	if total.IsInt64() {
		b.off = total.Int64()
	} else {
		b.off, b.offInf, b.offFrac = math.MaxInt64, true, false
	}
	return nil
}

// calendarOffset is an interval with months on a key of unit unit.
type calendarOffset struct {
	iv   messages.Interval
	unit temporalUnit
}

// target returns key v plus sign (+1 or -1) times the interval, computed
// as PostgreSQL's timestamp_pl_interval does. The exact target may lie
// between two units of the key: it is t plus a fraction when frac is set.
// inf is +1 or -1 when the target is beyond every int64 key.
func (c *calendarOffset) target(v, sign int64) (t int64, frac bool, inf int) {
	u := c.unit
	day, tod := v/u.perDay, v%u.perDay
	if tod < 0 {
		day, tod = day-1, tod+u.perDay
	}
	if day > maxCalendarDay || day < -maxCalendarDay {
		// Only an int64 date key can be this far out (date32 keys and
		// timestamps in seconds are not): beyond the calendar's range.
		if day > 0 {
			return 0, false, 1
		}
		return 0, false, -1
	}
	day = addMonths(day, sign*int64(c.iv.Months)) + sign*int64(c.iv.Days)
	x := i128of(day).mul(u.perDay).add(i128of(tod))
	us := c.iv.Micros
	if u.microsPerUnit == 0 {
		d := i128of(us).mul(1000)
		if sign < 0 {
			d = d.neg()
		}
		x = x.add(d)
	} else {
		k := u.microsPerUnit
		q, r := us/k, us%k
		if r < 0 {
			q, r = q-1, r+k
		}
		// us/k = q + r/k with 0 <= r < k.
		if sign > 0 {
			x = x.add(i128of(q))
			frac = r != 0
		} else {
			x = x.add(i128of(q).neg())
			if r != 0 {
				x, frac = x.add(i128of(-1)), true
			}
		}
	}
	t, ok := x.int64()
	if !ok {
		return 0, false, x.sign()
	}
	return t, frac, 0
}

// maxCalendarDay bounds the day numbers target converts to dates, so the
// arithmetic stays within int64: more than the 1.07e14 days of int64
// seconds.
const maxCalendarDay = 1 << 50

// addMonths adds months to a day number (days since 1970-01-01, proleptic
// Gregorian), keeping the day of the month unless the new month is shorter.
func addMonths(day, months int64) int64 {
	if months == 0 {
		return day
	}
	y, m, d := civilFromDays(day)
	mi := m - 1 + months
	y += floorDiv(mi, 12)
	m = mi - floorDiv(mi, 12)*12 + 1
	if dim := daysInMonth(y, m); d > dim {
		d = dim
	}
	return daysFromCivil(y, m, d)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysInMonth(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// civilFromDays and daysFromCivil convert between day numbers and
// (year, month, day) (H. Hinnant's algorithms, in 400-year eras).
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	y = yoe + era*400
	if m <= 2 {
		y++
	}
	return y, m, d
}

func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// i128 is a signed 128-bit integer, enough for a day number times the
// units in a day plus an interval's microseconds in nanoseconds.
type i128 struct {
	hi int64
	lo uint64
}

func i128of(x int64) i128 { return i128{hi: x >> 63, lo: uint64(x)} }

func (a i128) add(b i128) i128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	return i128{hi: a.hi + b.hi + int64(c), lo: lo}
}

func (a i128) neg() i128 {
	lo, b := bits.Sub64(0, a.lo, 0)
	return i128{hi: -a.hi - int64(b), lo: lo}
}

// mul multiplies by m > 0 (the products here stay far below 2^127).
func (a i128) mul(m int64) i128 {
	if a.hi < 0 {
		return a.neg().mul(m).neg()
	}
	hi, lo := bits.Mul64(a.lo, uint64(m))
	return i128{hi: a.hi*m + int64(hi), lo: lo}
}

func (a i128) int64() (int64, bool) {
	v := int64(a.lo)
	return v, a.hi == v>>63
}

func (a i128) sign() int {
	switch {
	case a.hi < 0:
		return -1
	case a.hi > 0 || a.lo > 0:
		return 1
	}
	return 0
}
