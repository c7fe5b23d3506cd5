package codemode_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/codemode"
	"github.com/hrns-dev/hrns/loop"
)

// counted wraps a tool so a test can tell how often programs called it.
type counted struct {
	def   *loop.ToolDef
	calls atomic.Int64
}

func count(def *loop.ToolDef) *counted {
	c := &counted{def: def}
	h := def.Handler
	def.Handler = func(ctx context.Context, call *loop.Call) (*loop.Output, error) {
		c.calls.Add(1)
		return h(ctx, call)
	}
	return c
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addTool() *loop.ToolDef {
	return loop.NewTool("add", "Adds two integers.", func(_ context.Context, in addArgs) (map[string]int, error) {
		return map[string]int{"sum": in.A + in.B}, nil
	})
}

type listArgs struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"only names starting with it"`
}

func listTool() *loop.ToolDef {
	return loop.NewTool("list_items", "Lists item names.", func(_ context.Context, in listArgs) ([]string, error) {
		return []string{"apple", "banana", "cherry"}, nil
	})
}

type itemArgs struct {
	Name string `json:"name"`
	Unit string `json:"unit,omitempty" enum:"g,kg" default:"g"`
}

type item struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
	Unit   string `json:"unit"`
}

func getTool() *loop.ToolDef {
	weights := map[string]int{"apple": 150, "banana": 120, "cherry": 5}
	return loop.NewTool("get_item", "Gets an item by name.", func(_ context.Context, in itemArgs) (item, error) {
		w, ok := weights[in.Name]
		if !ok {
			return item{}, errors.New("no item named " + in.Name)
		}
		return item{Name: in.Name, Weight: w, Unit: in.Unit}, nil
	})
}

type noArgs struct{}

// funcTool is a tool without arguments that runs fn.
func funcTool(name string, fn func(ctx context.Context) (string, error)) *loop.ToolDef {
	return loop.NewTool(name, "Test tool "+name+".", func(ctx context.Context, _ noArgs) (string, error) {
		return fn(ctx)
	})
}

func newRunner(t *testing.T, opts *codemode.Options, defs ...*loop.ToolDef) *codemode.Runner {
	t.Helper()
	if opts == nil {
		opts = &codemode.Options{}
	}
	if len(defs) > 0 {
		opts.Capabilities = loop.MustToolset(defs...)
	}
	r, err := codemode.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// asError returns err as a *codemode.Error, failing the test if it is not.
func asError(t *testing.T, err error) *codemode.Error {
	t.Helper()
	e, ok := errors.AsType[*codemode.Error](err)
	if !ok {
		t.Fatalf("error = %v (%T), want a *codemode.Error", err, err)
	}
	return e
}
