package convert

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// InferRows is how many leading rows of a CSV file ImportCSV reads to
// infer the column types when no schema is given.
const InferRows = 1000

// inferTypes are the types a CSV column may be inferred as, narrowest
// first: a column takes the first that parses every non-NULL value of the
// rows looked at.
var inferTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Float64,
	arrow.FixedWidthTypes.Boolean,
	arrow.FixedWidthTypes.Date32,
	arrow.FixedWidthTypes.Timestamp_us,
	arrow.BinaryTypes.String,
}

// parses reports whether arrow's CSV reader reads v as a value of typ.
func parses(v string, typ arrow.DataType) bool {
	var err error
	switch typ.ID() {
	case arrow.INT64:
		_, err = strconv.ParseInt(v, 10, 64)
	case arrow.FLOAT64:
		_, err = strconv.ParseFloat(v, 64)
	case arrow.BOOL:
		_, err = strconv.ParseBool(v)
	case arrow.DATE32:
		_, err = time.Parse("2006-01-02", v)
	case arrow.TIMESTAMP:
		var zoned bool
		if _, zoned, err = arrow.TimestampFromStringInLocation(v, arrow.Microsecond, time.UTC); err == nil && zoned {
			err = errors.New("has a time zone")
		}
	}
	return err == nil
}

// inferSchema returns the schema of CSV columns named header whose first
// rows are rows: every column nullable, of the first of inferTypes that
// parses all its non-NULL values (utf8 when all are NULL).
func inferSchema(header []string, rows [][]string, nulls []string) *arrow.Schema {
	fields := make([]arrow.Field, len(header))
	for c, name := range header {
		t := 0
		for _, row := range rows {
			v := row[c]
			if slices.Contains(nulls, v) {
				continue
			}
			for !parses(v, inferTypes[t]) {
				t++
			}
		}
		fields[c] = arrow.Field{Name: name, Type: inferTypes[t], Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// probeCSV reads the header and up to n data rows of r. It returns them,
// and a reader of all of r again.
func probeCSV(r io.Reader, comma rune, n int) (header []string, rows [][]string, replay io.Reader, err error) {
	var seen bytes.Buffer
	cr := csv.NewReader(io.TeeReader(r, &seen))
	cr.Comma = comma
	header, err = cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil, nil, errors.New("no header row")
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("header: %w", err)
	}
	for len(rows) < n {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, nil, err
		}
		rows = append(rows, row)
	}
	return header, rows, io.MultiReader(&seen, r), nil
}
