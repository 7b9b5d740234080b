package bosun

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// encodeResult encodes a handler's result; nil and JSON null become empty bytes (nothing is
// stored).
func encodeResult(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	encoded, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(encoded, []byte("null")) {
		return nil, nil
	}
	return encoded, nil
}

// mustJSON encodes values the SDK built itself (maps of JSON values), which always encode.
func mustJSON(v any) []byte {
	encoded, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return encoded
}

// decodeField decodes one JSON field of a request; empty bytes mean "not given" (nil, false).
func decodeField(field string, raw []byte) (any, bool, error) {
	if len(raw) == 0 {
		return nil, false, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, fmt.Errorf("field `%s` of the request is not valid JSON: %w", field, err)
	}
	return v, true, nil
}
