package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	pngenc "image/png"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// Calling a tool's handler directly shows what the model reads; in an
// application the agent's loop does this.
func ExampleFiles() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\nworld\n"), 0o644)

	files, err := tools.Files(dir, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(files.Names())

	read, _ := files.Lookup("read_file")
	out, _ := read.Handler(context.Background(), &loop.Call{Arguments: json.RawMessage(`{"path":"hello.txt","offset":2}`)})
	fmt.Println(out.Content[0].Text)

	_, err = read.Handler(context.Background(), &loop.Call{Arguments: json.RawMessage(`{"path":"../etc/passwd"}`)})
	fmt.Println(strings.Replace(err.Error(), dir, "DIR", 1))
	// Output:
	// [read_file list_files write_file edit_file]
	//      2	world
	//
	// [showing lines 2-2 of 2: the end of the file]
	// path "../etc/passwd" is outside the working directory DIR; use a path relative to it
}

func ExampleByName() {
	// As a command line would: --tools read_file,list_files,web_fetch
	flag := "read_file,list_files,web_fetch"
	toolset, err := tools.ByName(strings.Split(flag, ","), &tools.Config{Dir: "."})
	if err != nil {
		panic(err)
	}
	for def := range toolset.All() {
		fmt.Printf("%s concurrent=%v approval=%v\n", def.Name, def.Concurrent, def.RequiresApproval)
	}
	// Output:
	// read_file concurrent=true approval=false
	// list_files concurrent=true approval=false
	// web_fetch concurrent=true approval=false
}

func ExampleNames() {
	fmt.Println(strings.Join(tools.Names(), ","))
	// Output:
	// read_file,list_files,write_file,edit_file,grep,run_command,web_fetch,upload_media,todo_write
}

// upload_media returns the file itself, after a line that describes it; a
// file of another type is refused, whatever its name.
func ExampleMedia() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	var png bytes.Buffer
	_ = pngenc.Encode(&png, image.NewGray(image.Rect(0, 0, 640, 480)))
	os.WriteFile(filepath.Join(dir, "chart.png"), png.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.png"), []byte("not a picture\n"), 0o644)

	media, err := tools.Media(dir, nil)
	if err != nil {
		panic(err)
	}
	upload, _ := media.Lookup("upload_media")
	out, _ := upload.Handler(context.Background(), &loop.Call{Arguments: json.RawMessage(`{"path":"chart.png"}`)})
	desc, _, _ := strings.Cut(out.Content[0].Text, " pixels, ") // then the size in KiB
	fmt.Println(desc)
	fmt.Println(out.Content[1].Kind, out.Content[1].Media.MIMEType, len(out.Content[1].Media.Data) == png.Len())

	_, err = upload.Handler(context.Background(), &loop.Call{Arguments: json.RawMessage(`{"path":"notes.png"}`)})
	fmt.Println(err)
	// Output:
	// chart.png: PNG image, 640x480
	// image image/png true
	// notes.png holds text (text/plain; charset=utf-8), not a PNG image as its name suggests (the content counts, not the name); upload_media accepts only PNG, JPEG, GIF and WebP images and PDF documents
}

func ExampleHTMLToMarkdown() {
	base, _ := url.Parse("https://example.org/docs/")
	md, err := tools.HTMLToMarkdown(context.Background(), `<html><head><title>Docs</title><script>track()</script></head>
<body><nav><a href="/">Home</a></nav>
<h1>Install</h1>
<p>Get the <a href="cli.html">command line tool</a>:</p>
<pre><code class="language-sh">go install example.org/cli@latest</code></pre>
<ul><li>fast</li><li>small</li></ul>
</body></html>`, base, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(md.Title)
	fmt.Println(md.Text)
	// Output:
	// Docs
	// # Install
	//
	// Get the [command line tool](https://example.org/docs/cli.html):
	//
	// ```sh
	// go install example.org/cli@latest
	// ```
	//
	// - fast
	// - small
}

// grep searches file contents; what .gitignore ignores is skipped.
func ExampleGrep() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\n// TODO: say hello\nfunc main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "debug.log"), []byte("TODO: ignored\n"), 0o644)

	grep, err := tools.Grep(dir, nil)
	if err != nil {
		panic(err)
	}
	out, err := grep.Invoke(context.Background(), llm.ToolCall{Name: "grep", Arguments: llm.Arguments(`{"pattern":"todo","case_insensitive":true,"context":1}`)}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Content[0].Text)
	// Output:
	// main.go-2-
	// main.go:3: // TODO: say hello
	// main.go-4- func main() {}
	// [1 matching line]
}

// The plan is the arguments of a todo_write call; PlanOf reads it back from
// the call's result chunk, as a consumer of the run's chunks would.
func ExamplePlanOf() {
	args := json.RawMessage(`{"todos":[{"content":"Read the code","status":"completed"},{"content":"Fix the bug","status":"in_progress"}]}`)
	out, err := tools.Todo().Invoke(context.Background(), llm.ToolCall{Name: "todo_write", Arguments: llm.Arguments(args)}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Content[0].Text)

	chunk := loop.Chunk{Type: loop.ChunkToolCallResult, ToolCall: &loop.ToolCallInfo{Name: "todo_write", Arguments: args}}
	if plan, ok := tools.PlanOf(chunk); ok {
		for _, t := range plan.Todos {
			fmt.Printf("%s: %s\n", t.Status, t.Content)
		}
	}
	// Output:
	// The plan is recorded: 2 steps, 1 completed, 1 in progress, 0 pending. Now: Fix the bug
	// completed: Read the code
	// in_progress: Fix the bug
}
