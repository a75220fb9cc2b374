package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kvgen/kvgen/internal/ociimage"
)

// remoteFlags are the flags of build -image and inspect for registries.
type remoteFlags struct {
	insecure bool
	timeout  time.Duration
	minRate  rateFlag
}

func (f *remoteFlags) register(fs *flag.FlagSet) {
	f.timeout, f.minRate = 10*time.Minute, 64<<10
	fs.BoolVar(&f.insecure, "insecure", false, "reach a registry on this machine's loopback over plain HTTP (that registry alone: not where it redirects or sends for a token)")
	fs.DurationVar(&f.timeout, "registry-timeout", f.timeout, "the most time all of the command's registry exchanges may take, together; 0 for no limit")
	fs.Var(&f.minRate, "registry-min-rate", "the least `rate`, in bytes per second, at which a registry must send or take a body once the body has run 30s, such as 64KiB or 1MiB; 0 for none")
}

// remote is how the flags say to reach registries; an error is a usage
// error.
func (f *remoteFlags) remote() (ociimage.Remote, error) {
	if f.timeout < 0 {
		return ociimage.Remote{}, fmt.Errorf("-registry-timeout %s is negative; give a duration such as 10m, or 0 for no limit", f.timeout)
	}
	return ociimage.Remote{Insecure: f.insecure, MinRate: int64(f.minRate)}.WithTotal(f.timeout), nil
}

// rateFlag is a count of bytes per second: a number, with a unit of B,
// KiB, MiB or GiB (or k, M, G for these), and an optional /s.
type rateFlag int64

var rateUnits = []struct {
	names []string
	n     int64
}{
	{[]string{"GiB", "G"}, 1 << 30},
	{[]string{"MiB", "M"}, 1 << 20},
	{[]string{"KiB", "K", "k"}, 1 << 10},
	{[]string{"B", ""}, 1},
}

func (r *rateFlag) String() string {
	n := int64(*r)
	for _, u := range rateUnits {
		if n != 0 && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.names[0]
		}
	}
	return "0"
}

func (r *rateFlag) Set(v string) error {
	s := strings.TrimSuffix(v, "/s")
	for _, u := range rateUnits {
		for _, name := range u.names {
			num, ok := strings.CutSuffix(s, name)
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n < 0 || n > (1<<62)/u.n {
				continue
			}
			*r = rateFlag(n * u.n)
			return nil
		}
	}
	return errors.New("not a rate: want bytes per second as a count, such as 65536, or with a unit, such as 64KiB or 1MiB (0 for none)")
}
