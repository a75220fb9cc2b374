package main

import (
	"testing"
	"time"
)

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	got, err := sourceDateEpoch()
	if err != nil || !got.Equal(time.Unix(0, 0)) {
		t.Errorf("unset: %v, %v; want the Unix epoch", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	got, err = sourceDateEpoch()
	if err != nil || !got.Equal(time.Unix(1700000000, 0)) || got.Location() != time.UTC {
		t.Errorf("1700000000: %v, %v", got, err)
	}
	for _, bad := range []string{"-1", "soon", "1.5"} {
		t.Setenv("SOURCE_DATE_EPOCH", bad)
		if _, err := sourceDateEpoch(); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
