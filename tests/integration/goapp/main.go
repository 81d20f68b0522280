// goapp is the Go program ember's scraper tests scrape: it serves the
// standard library's net/http/pprof endpoints while it burns CPU, allocates,
// blocks on channels and contends on a mutex, so that every default profile
// (process_cpu, memory, goroutine, block, mutex) has something to show.
//
// Standard library only (the tests run offline). Flags:
//
//	-addr      listen address; "127.0.0.1:0" picks a port, printed on stdout
//	           as "listening 127.0.0.1:PORT" once the server accepts
//	-dump-dir  if set, every /debug/pprof/allocs response is also written to
//	           <dir>/allocs-<n>.pb.gz (n from 1), byte for byte as served, so a
//	           test can run `go tool pprof -base` on exactly what was scraped
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// burnCPU is the hot function: the tests expect it on top of the CPU flame graph.
//
//go:noinline
func burnCPU(stop <-chan struct{}) {
	x := 1.0
	for {
		select {
		case <-stop:
			return
		default:
		}
		for i := 0; i < 200000; i++ {
			x = math.Sqrt(x*x+float64(i)) / 1.0000001
		}
		if x < 0 {
			fmt.Println(x) // keeps the loop from being optimised away
		}
	}
}

var keep [64][]byte // live allocations: something for inuse_* to show

// allocate allocates steadily, keeping a few buffers alive.
//
//go:noinline
func allocate() {
	for i := 0; ; i++ {
		buf := make([]byte, 16<<10+(i%7)*1024)
		buf[0] = byte(i)
		keep[i%len(keep)] = buf
		if i%64 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// blockOnChannel waits on a channel fed slowly: the block profile.
//
//go:noinline
func blockOnChannel(ch <-chan int) {
	for range ch {
	}
}

// contendMutex holds a shared lock briefly from several goroutines: the mutex profile.
//
//go:noinline
func contendMutex(mu *sync.Mutex, counter *int64) {
	for {
		mu.Lock()
		atomic.AddInt64(counter, 1)
		time.Sleep(50 * time.Microsecond)
		mu.Unlock()
		runtime.Gosched()
	}
}

// teeWriter copies what a handler writes into a buffer.
type teeWriter struct {
	http.ResponseWriter
	buf    bytes.Buffer
	status int
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.buf.Write(p)
	return t.ResponseWriter.Write(p)
}

func (t *teeWriter) WriteHeader(code int) {
	t.status = code
	t.ResponseWriter.WriteHeader(code)
}

// dumpingAllocs serves the allocs profile and keeps a copy of each response.
func dumpingAllocs(dir string) http.Handler {
	var n int64
	inner := pprof.Handler("allocs")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &teeWriter{ResponseWriter: w, status: http.StatusOK}
		inner.ServeHTTP(tw, r)
		if tw.status != http.StatusOK || r.URL.Query().Get("seconds") != "" {
			return
		}
		i := atomic.AddInt64(&n, 1)
		path := filepath.Join(dir, fmt.Sprintf("allocs-%d.pb.gz", i))
		if err := os.WriteFile(path+".tmp", tw.buf.Bytes(), 0o644); err == nil {
			os.Rename(path+".tmp", path)
		}
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dumpDir := flag.String("dump-dir", "", "write every allocs response here")
	flag.Parse()

	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)

	stop := make(chan struct{})
	go burnCPU(stop)
	go allocate()
	ch := make(chan int)
	for i := 0; i < 4; i++ {
		go blockOnChannel(ch)
	}
	go func() {
		for i := 0; ; i++ {
			time.Sleep(2 * time.Millisecond)
			ch <- i
		}
	}()
	var mu sync.Mutex
	var counter int64
	for i := 0; i < 4; i++ {
		go contendMutex(&mu, &counter)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	if *dumpDir != "" {
		mux.Handle("/debug/pprof/allocs", dumpingAllocs(*dumpDir))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening %s\n", ln.Addr().String())
	os.Stdout.Sync()
	log.Fatal(http.Serve(ln, mux))
}
