package tools

import (
	"context"
	"io"
)

// liveKey carries a live output sink in a context.
type liveKey struct{}

// LiveOutput receives the output of a running command as it comes: the
// command (as the model wrote it) and the bytes, stdout and stderr
// combined. It is called from the goroutine that reads the command's
// output and must not keep p.
type LiveOutput func(command string, p []byte)

// WithLiveOutput returns a context whose run_command calls also send their
// output to f as it comes, for a display (the hrns chat shows the last
// lines of a running command). What the model gets is unchanged. The
// output is the command's, untrusted: escape it before showing it.
func WithLiveOutput(ctx context.Context, f LiveOutput) context.Context {
	return context.WithValue(ctx, liveKey{}, f)
}

// liveWriter adds the live sink of ctx, if any, to w.
func liveWriter(ctx context.Context, command string, w io.Writer) io.Writer {
	f, _ := ctx.Value(liveKey{}).(LiveOutput)
	if f == nil {
		return w
	}
	return io.MultiWriter(w, liveFunc{command, f})
}

type liveFunc struct {
	command string
	f       LiveOutput
}

func (l liveFunc) Write(p []byte) (int, error) {
	l.f(l.command, p)
	return len(p), nil
}
