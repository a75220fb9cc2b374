package main

import (
	"testing"
	"time"

	"github.com/kvgen/kvgen/gen/deploy"
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

func TestVariant(t *testing.T) {
	for _, tc := range []struct {
		target deploy.Target
		env    []string
		want   string
	}{
		{deploy.Target{GOOS: "linux", GOARCH: "amd64"}, nil, ""},
		{deploy.Target{GOOS: "linux", GOARCH: "arm"}, nil, "v7"},
		{deploy.Target{GOOS: "linux", GOARCH: "arm"}, []string{"GOARM=6"}, "v6"},
		{deploy.Target{GOOS: "linux", GOARCH: "arm"}, []string{"GOARM=5,softfloat"}, "v5"},
	} {
		if got := variant(tc.target, tc.env); got != tc.want {
			t.Errorf("variant(%v, %q) = %q, want %q", tc.target, tc.env, got, tc.want)
		}
	}
}
