package session

import (
	"context"
	"testing"
	"time"
)

// TestWorkerGoroutineKept checks that a worker's goroutine runs the next
// session handed to it (m.idleWorkers) once it has run one, and ends
// when none comes for workerIdle or the manager stops.
func TestWorkerGoroutineKept(t *testing.T) {
	m := &Manager{idleWorkers: make(chan func()), workerIdle: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan int, 2)
	done := make(chan struct{})
	go func() {
		m.worker(ctx, func() { ran <- 1 })
		close(done)
	}()
	if got := <-ran; got != 1 {
		t.Fatalf("ran %d first", got)
	}
	m.idleWorkers <- func() { ran <- 2 } // blocks until the goroutine takes it
	if got := <-ran; got != 2 {
		t.Fatalf("ran %d second", got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's goroutine did not end when its manager stopped")
	}

	m.workerIdle = time.Millisecond
	done = make(chan struct{})
	go func() {
		m.worker(context.Background(), func() {})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's goroutine did not end once idle")
	}
}
