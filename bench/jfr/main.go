// Command jfrparser_bench times Grafana's jfr-parser v0.18.0 (the version
// Pyroscope pins) converting JFR recordings to pprof in-process, so
// bench/jfr_bench.py can print it beside ember's converter.
// Usage: jfrparser_bench ITERATIONS FILE.jfr...   (files already gunzipped)
// Prints one JSON line per file in jfr_bench's shape: file, bytes, mb_per_s
// (from the median), median_ms, min_ms, totals ("metric:type:unit" -> sum).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/grafana/jfr-parser/pprof"
)

func convert(body []byte) *pprof.Profiles {
	pi := &pprof.ParseInput{SampleRate: 100}
	res, err := pprof.ParseJFR(body, pi, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jfr-parser:", err)
		os.Exit(1)
	}
	return res
}

// totals sums every sample value per metric and sample type, the figure
// both converters must agree on.
func totals(res *pprof.Profiles) map[string]int64 {
	t := map[string]int64{}
	for _, p := range res.Profiles {
		st := p.Profile.StringTable
		for _, s := range p.Profile.Sample {
			for i, v := range s.Value {
				vt := p.Profile.SampleType[i]
				t[p.Metric+":"+st[vt.Type]+":"+st[vt.Unit]] += v
			}
		}
	}
	return t
}

func timeFile(path string, n int) {
	body, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ms := make([]float64, n)
	var res *pprof.Profiles
	for i := range ms {
		start := time.Now()
		res = convert(body)
		ms[i] = float64(time.Since(start).Nanoseconds()) / 1e6
	}
	sort.Float64s(ms)
	med := ms[n/2]
	line, _ := json.Marshal(map[string]any{
		"file": path, "bytes": len(body), "median_ms": med, "min_ms": ms[0],
		"mb_per_s": float64(len(body)) / 1e6 / (med / 1e3), "totals": totals(res),
	})
	fmt.Println(string(line))
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: jfrparser_bench ITERATIONS FILE.jfr...")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "ITERATIONS must be a positive integer")
		os.Exit(2)
	}
	for _, f := range os.Args[2:] {
		timeFile(f, n)
	}
}
