package codemode_test

import (
	"context"
	"fmt"

	"github.com/hrns-dev/hrns/codemode"
	"github.com/hrns-dev/hrns/loop"
)

func ExampleRunner_Run() {
	type weightArgs struct {
		Name string `json:"name"`
	}
	weight := loop.NewTool("weight", "Returns an item's weight in grams.",
		func(_ context.Context, in weightArgs) (map[string]any, error) {
			return map[string]any{"name": in.Name, "grams": len(in.Name) * 10}, nil
		})
	runner, err := codemode.New(&codemode.Options{Capabilities: loop.MustToolset(weight)})
	if err != nil {
		panic(err)
	}
	res, err := runner.Run(context.Background(), `
heaviest = None
for name in ["fig", "apple", "kiwi"]:
    w = weight(name=name)
    print(w["name"], w["grams"])
    if heaviest == None or w["grams"] > heaviest["grams"]:
        heaviest = w
result = heaviest["name"]
`)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	// Output:
	// fig 30
	// apple 50
	// kiwi 40
	// result: "apple"
}

func ExampleRunner_Check() {
	runner, _ := codemode.New(&codemode.Options{Capabilities: loop.MustToolset(
		loop.NewTool("weight", "Returns an item's weight.", func(_ context.Context, in struct {
			Name string `json:"name"`
		}) (int, error) {
			return 0, nil
		}),
	)})
	err := runner.Check("w = weight(item='fig')\nrm(path='/')")
	fmt.Println(err)
	// Output:
	// the program was not run:
	// 1:5: weight is missing required argument "name"; it takes name: string
	// 1:12: weight has no argument "item"; it takes name: string
	// 2:1: undefined: rm; granted capabilities: weight
}
