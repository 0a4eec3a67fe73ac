package simulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// SinkRecord is one line of the sink's --record file: a verified delivery the sink answered
// 2xx. The line is written (one write(2)) before the answer goes out, so a SIGKILL of the sink
// loses no delivery it acknowledged; the file's line order is the order of receipt, across
// restarts of the sink that append to the same file.
type SinkRecord struct {
	WebhookID string    `json:"webhook_id"`
	Type      string    `json:"type"`
	TradeNo   string    `json:"trade_no"`
	Timestamp time.Time `json:"timestamp"` // the event's own timestamp (its body's)
	At        time.Time `json:"at"`        // when the sink received it
}

// OpenSinkRecord opens path for appending records, creating it if need be. A last line without
// its newline (the sink was killed in the middle of writing it, so before it answered) is cut
// off first: it was never acknowledged, and the next line must start on a line of its own.
func OpenSinkRecord(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600) // #nosec G304 -- the operator's --record file
	if err != nil {
		return nil, err
	}
	if err := cutPartialLine(f); err != nil {
		_ = f.Close() // the cut's error is the one to report
		return nil, fmt.Errorf("sink record %s: %w", path, err)
	}
	return f, nil
}

// cutPartialLine truncates f after its last newline.
func cutPartialLine(f *os.File) error {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil || size == 0 {
		return err
	}
	const chunk = 4096
	buf := make([]byte, chunk)
	for end := size; end > 0; {
		start := max(0, end-chunk)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			if start+int64(i)+1 == size {
				return nil
			}
			return f.Truncate(start + int64(i) + 1)
		}
		end = start
	}
	return f.Truncate(0)
}

// appendRecord writes r as one JSON line in a single Write, so that concurrent sinks' lines
// (and a killed sink's last line) never interleave with another.
func appendRecord(w io.Writer, r SinkRecord) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}

// ReadSinkRecords reads a --record file's lines in order. A last line without its newline was
// never acknowledged and is left out; any other line that is not a record is an error naming it.
func ReadSinkRecords(r io.Reader) ([]SinkRecord, error) {
	var out []SinkRecord
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a partial last line, if any, is dropped
		}
		if err != nil {
			return out, err
		}
		var rec SinkRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return out, fmt.Errorf("sink record line %d: %w", n, err)
		}
		if rec.WebhookID == "" || rec.Type == "" {
			return out, fmt.Errorf("sink record line %d: no webhook_id or type", n)
		}
		out = append(out, rec)
	}
}
