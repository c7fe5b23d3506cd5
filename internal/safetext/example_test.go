package safetext_test

import (
	"fmt"

	"github.com/hrns-dev/hrns/internal/safetext"
)

func ExampleEscape() {
	fmt.Println(safetext.Escape("echo x > f; id >> f #\r\x1b[2K  $ ls -la"))
	// Output: echo x > f; id >> f #\r\x1b[2K  $ ls -la
}

func ExampleRender() {
	blk := safetext.Render("ls\u202e\nrm -rf ~", &safetext.Options{Mark: func(e string) string { return "[" + e + "]" }})
	for _, l := range blk.Lines {
		fmt.Println("  > " + l.Text)
	}
	fmt.Println(blk.Escaped, "escaped")
	// Output:
	//   > ls[\u202e]
	//   > rm -rf ~
	// 1 escaped
}
