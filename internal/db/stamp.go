package db

import (
	"bytes"
	"fmt"
)

// Stamped is JSON that a statement completes with the time it runs at:
// Head || the transaction's now() (UTC, to the second, as the API writes
// times) || Tail. A transaction sent in one round trip (Pipeline) cannot
// read the updated_at its update sets before writing the response or the
// event that carries it; the statement writes it instead.
type Stamped struct{ Head, Tail string }

// zeroTime is how encoding/json writes a zero time.Time in UTC.
const zeroTime = `"0001-01-01T00:00:00Z"`

// StampAt splits b, JSON whose field (the last one of that name) holds the
// zero time, around that value, so that the database writes the time.
func StampAt(b []byte, field string) (Stamped, error) {
	at := bytes.LastIndex(b, []byte(`"`+field+`":`+zeroTime))
	if at < 0 {
		return Stamped{}, fmt.Errorf("stamp: no zero %q in %s", field, b)
	}
	head := at + len(field) + 4 // the quoted name, the colon, the value's opening quote
	return Stamped{Head: string(b[:head]), Tail: string(b[head+len(zeroTime)-2:])}, nil
}
