// dlock-bench-go: lock/unlock throughput of goroutines sharing one Go client.
// SPDX-License-Identifier: MIT

// Command dlock-bench-go measures package dlock: -c goroutines share one
// Client, each looping Lock/Unlock on a name of its own, for -d seconds
// after -w seconds of warm-up. It prints one line like dlock-bench
// throughput's:
//
//	pairs_per_sec=… pairs=… seconds=… goroutines=… client_cpu_pct=… all_pairs=…
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dlock "github.com/dlockd/dlockd/clients/go"
)

func main() {
	sock := flag.String("s", dlock.DefaultPath(), "dlockd's socket")
	workers := flag.Int("c", 50, "goroutines")
	secs := flag.Float64("d", 10, "seconds measured")
	warm := flag.Float64("w", 1, "seconds of warm-up")
	prefix := flag.String("k", "gobench-"+strconv.Itoa(os.Getpid())+"-", "lock name prefix")
	flag.Parse()

	ctx := context.Background()
	c, err := dlock.Dial(ctx, *sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlock-bench-go:", err)
		os.Exit(2)
	}
	defer c.Close()

	start := time.Now()
	t0 := start.Add(time.Duration(*warm * float64(time.Second)))
	t1 := t0.Add(time.Duration(*secs * float64(time.Second)))
	var pairs, allPairs int64
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			for {
				l, err := c.Lock(ctx, name)
				if err != nil {
					errs <- err
					return
				}
				if err := l.Unlock(); err != nil {
					errs <- err
					return
				}
				now := time.Now()
				atomic.AddInt64(&allPairs, 1)
				if now.After(t1) {
					return
				}
				if now.After(t0) {
					atomic.AddInt64(&pairs, 1)
				}
			}
		}(*prefix + strconv.Itoa(i))
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		fmt.Fprintln(os.Stderr, "dlock-bench-go:", err)
		os.Exit(1)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	elapsed := t1.Sub(t0).Seconds()
	fmt.Printf("pairs_per_sec=%.0f pairs=%d seconds=%.3f goroutines=%d client_cpu_pct=%.1f all_pairs=%d\n",
		float64(pairs)/elapsed, pairs, elapsed, *workers,
		100*cpu.Seconds()/time.Since(start).Seconds(), allPairs)
}
