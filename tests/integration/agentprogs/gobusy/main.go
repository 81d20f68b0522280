// gobusy burns CPU in two named Go functions for the agent's tests:
// main.main -> main.work -> main.hotLoop (most of the time) and
// main.coldLoop. Go on amd64 keeps frame pointers, so the agent unwinds it.
//
//	gobusy SECONDS
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink uint64

//go:noinline
func hotLoop(n int) {
	for i := 0; i < n; i++ {
		sink = sink*6364136223846793005 + uint64(i)
	}
}

//go:noinline
func coldLoop(n int) {
	for i := 0; i < n; i++ {
		sink = sink*2862933555777941757 + uint64(i)
	}
}

//go:noinline
func work(seconds float64) {
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		hotLoop(3000000)
		coldLoop(300000)
	}
}

func main() {
	seconds := 3.0
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			seconds = v
		}
	}
	fmt.Printf("pid %d\n", os.Getpid())
	work(seconds)
}
