// A program profiled by the official Go SDK (grafana/pyroscope-go) pushing to
// ember: a CPU-bound function of known name, allocations, mutex contention,
// blocking, and a tag wrapper. Driven by tests/integration/test_sdk_go.py.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/grafana/pyroscope-go"
)

var sink []byte
var keep [][]byte

//go:noinline
func emberBusyGo(n int) uint64 {
	var h uint64 = 1469598103934665603
	for i := 0; i < n; i++ {
		h ^= uint64(i)
		h *= 1099511628211
	}
	return h
}

//go:noinline
func emberAllocGo() {
	sink = make([]byte, 64<<10)
	if len(keep) < 64 {
		keep = append(keep, make([]byte, 32<<10))
	}
}

//go:noinline
func emberLockGo(mu *sync.Mutex) {
	mu.Lock()
	emberBusyGo(20000)
	mu.Unlock()
}

func main() {
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	secs, _ := strconv.Atoi(os.Getenv("SDK_SECONDS"))
	p, err := pyroscope.Start(pyroscope.Config{
		ApplicationName: os.Getenv("SDK_APP"),
		ServerAddress:   os.Getenv("SDK_URL"),
		Tags:            map[string]string{"env": "sdk-test"},
		UploadRate:      2 * time.Second,
		ProfileTypes: []pyroscope.ProfileType{
			pyroscope.ProfileCPU, pyroscope.ProfileAllocObjects, pyroscope.ProfileAllocSpace,
			pyroscope.ProfileInuseObjects, pyroscope.ProfileInuseSpace, pyroscope.ProfileGoroutines,
			pyroscope.ProfileMutexCount, pyroscope.ProfileMutexDuration,
			pyroscope.ProfileBlockCount, pyroscope.ProfileBlockDuration,
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pyroscope.Start:", err)
		os.Exit(1)
	}
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ { // contention: two goroutines share one mutex
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				emberLockGo(&mu)
			}
		}()
	}
	pyroscope.TagWrapper(context.Background(), pyroscope.Labels("request", "busy"), func(context.Context) {
		var x uint64
		for time.Now().Before(deadline) {
			x += emberBusyGo(5_000_000)
			emberAllocGo()
		}
		fmt.Println(x)
	})
	wg.Wait()
	if err := p.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
	}
}
