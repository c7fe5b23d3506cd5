//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"sync"
)

// A Box runs the commands of one sandbox. On this platform each runs as
// [Run] runs it.
type Box struct {
	mu     sync.Mutex
	closed bool
}

// NewBox returns a Box for the sandbox of spec.
func NewBox(spec *Spec) (*Box, error) {
	if spec == nil {
		return nil, fmt.Errorf("%w: nil spec", ErrInvalidSpec)
	}
	return &Box{}, nil
}

// Run runs the command of spec as [Run] does.
func (b *Box) Run(ctx context.Context, spec *Spec) (*Result, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: the box is closed", ErrInvalidSpec)
	}
	return Run(ctx, spec)
}

// Close ends the Box; Run then fails.
func (b *Box) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}
