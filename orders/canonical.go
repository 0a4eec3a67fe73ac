package orders

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"
)

// ErrBadJSON means the body is not one well-formed JSON value (or repeats an object key).
var ErrBadJSON = errors.New("malformed JSON body")

// Canonical re-encodes a JSON document with object keys sorted and no insignificant space, so that
// two bodies that mean the same hash the same. Numbers keep their literal text. Duplicate keys,
// invalid UTF-8 and trailing data are refused: two readers could disagree on what they mean.
func Canonical(body []byte) ([]byte, error) {
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrBadJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var out bytes.Buffer
	if err := canonicalValue(dec, &out, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON value", ErrBadJSON)
	}
	return out.Bytes(), nil
}

const maxDepth = 32

func canonicalValue(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrBadJSON, maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonicalObject(dec, out, depth)
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := canonicalValue(dec, out, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("%w: %v", ErrBadJSON, err)
			}
			out.WriteByte(']')
			return nil
		}
		return fmt.Errorf("%w: unexpected %q", ErrBadJSON, t)
	case json.Number:
		out.WriteString(t.String())
	default: // string, bool, nil
		b, _ := json.Marshal(t) // these kinds always marshal
		out.Write(b)
	}
	return nil
}

func canonicalObject(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	members := map[string][]byte{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadJSON, err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: object key is not a string", ErrBadJSON)
		}
		if _, dup := members[key]; dup {
			return fmt.Errorf("%w: duplicate key %q", ErrBadJSON, key)
		}
		var v bytes.Buffer
		if err := canonicalValue(dec, &v, depth+1); err != nil {
			return err
		}
		members[key] = v.Bytes()
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(members[k])
	}
	out.WriteByte('}')
	return nil
}

// RequestHash identifies a create call for its idempotency key: stored as the record's (and the
// order's) request_hash, a repeat of the key with another hash is a reused key. It is SHA-256
// over method, route and the canonical body, each separated by a newline.
func RequestHash(method, route string, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(method + "\n" + route + "\n"))
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}
