// Package hrns_test enforces repository policy: every package is documented,
// and dependencies point down the architecture's diagram.
package hrns_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/hrns-dev/hrns"

// allowed lists, for each package, the hrns packages its non-test code may
// import. A package not listed may import anything but cmd.
var allowed = map[string][]string{
	"llm":              {},
	"pricing":          {},
	"llm/llmtest":      {"llm"},
	"internal/sse":     {},
	"internal/httpapi": {"llm"},
	// internal/openaimodels: the table of OpenAI's model families (their
	// reasoning efforts), which openai and responses share.
	"internal/openaimodels":           {"llm"},
	"internal/prefixcache":            {"internal/httpapi", "llm"},
	"internal/prefixcache/prefixtest": {"llm"},
	"internal/safetext":               {},
	"internal/imagesize":              {},
	"internal/netpolicy":              {},
	"internal/gctune":                 {},
	"internal/rawjson":                {},
	// internal/fairshare: the rule that keeps a share of the server's
	// global bounds for keys with few waiting (long-polls, reads).
	"internal/fairshare": {},
	"internal/otlp":      {},
	// internal/retry: a claim made again after an error, and the grace of
	// a stopping process (session, platform/webhook, platform/schedule).
	"internal/retry":        {},
	"cmd/hrns/internal/tui": {"cmd/hrns/internal/callview", "cmd/hrns/internal/goldmark/ast", "cmd/hrns/internal/goldmark/parser", "cmd/hrns/internal/goldmark/text", "cmd/hrns/internal/goldmark/util", "internal/safetext", "llm", "loop", "loop/compact", "pricing", "tools"},
	// cmd/hrns/internal/goldmark: goldmark v1.8.2's parser, whose regular
	// expressions and tables are built on first use (its README).
	"cmd/hrns/internal/goldmark/ast":    {"cmd/hrns/internal/goldmark/text", "cmd/hrns/internal/goldmark/util"},
	"cmd/hrns/internal/goldmark/parser": {"cmd/hrns/internal/goldmark/ast", "cmd/hrns/internal/goldmark/text", "cmd/hrns/internal/goldmark/util"},
	"cmd/hrns/internal/goldmark/text":   {"cmd/hrns/internal/goldmark/util"},
	"cmd/hrns/internal/goldmark/util":   {},
	"cmd/hrns/internal/callview":        {"internal/safetext", "tools"},
	"openai":                            {"llm", "internal/httpapi", "internal/openaimodels", "internal/prefixcache", "internal/sse"},
	"openai/openaitest":                 {"llm"},
	"anthropic":                         {"llm", "internal/httpapi", "internal/prefixcache", "internal/sse"},
	"responses":                         {"llm", "internal/httpapi", "internal/openaimodels", "internal/prefixcache", "internal/sse"},
	"responses/responsestest":           {"llm"},
	"gemini":                            {"llm", "internal/httpapi", "internal/prefixcache", "internal/sse"},
	"gemini/geminitest":                 {"llm"},
	"loop":                              {"llm", "loop/compact"},
	"loop/compact":                      {"llm"},
	"loop/cmdline":                      {"loop"},
	"store":                             {},
	"store/sqlite":                      {"store", "store/internal/wake"},
	"store/postgres":                    {"store", "store/internal/wake"},
	"store/postgres/postgrestest":       {},
	"store/storetest":                   {"store"},
	"store/internal/wake":               {},
	"api":                               {},
	// The platform's packages stand beside the runtime: each imports
	// session (and store, api) and none imports another (see
	// TestLayers); the server and the command wire them together.
	"platform/feedback":            {"session"},
	"platform/quota":               {"session"},
	"platform/registry":            {"internal/rawjson", "session", "store"},
	"platform/schedule":            {"api", "internal/retry", "session", "store"},
	"platform/webhook":             {"api", "internal/netpolicy", "internal/retry", "store"},
	"platform/webhook/webhooktest": {},
	"platform/vault":               {"api", "loop", "session", "store"},

	// session fetches the URL files of user messages under the address
	// policy (session/files.go).
	"session":   {"api", "internal/fairshare", "internal/imagesize", "internal/netpolicy", "internal/rawjson", "internal/retry", "llm", "loop", "pricing", "skills", "store"},
	"server":    {"api", "browser/userdata", "internal/fairshare", "platform/feedback", "platform/quota", "platform/registry", "platform/schedule", "platform/vault", "platform/webhook", "session", "server/ui", "store", "tools"},
	"server/ui": {},
	"client":    {"api", "llm", "loop"},
	// The client half of the user's desktop: the SDK (client) running
	// computer actions on this display (desktop), shown to the person
	// with the untrusted-text rules (internal/safetext). Its own package,
	// so that client links no desktop or sandbox.
	"client/userdesktop": {"api", "client", "desktop", "internal/safetext"},
	"browser":            {"llm", "loop", "internal/netpolicy"},
	"browser/userdata":   {},
	"desktop":            {"llm", "loop", "sandbox"}, // the computer tool (loop), its screenshots (llm), the sandboxed display (sandbox)
	"otel":               {"llm", "loop"},
}

type pkg struct {
	doc     bool
	imports map[string]bool // hrns packages, without the module path
	all     map[string]bool // every import path
}

func packages(t *testing.T) map[string]*pkg {
	t.Helper()
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		p := pkgs[dir]
		if p == nil {
			p = &pkg{imports: map[string]bool{}, all: map[string]bool{}}
			pkgs[dir] = p
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			p.doc = true
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			p.all[path] = true
			if rest, ok := strings.CutPrefix(path, module+"/"); ok {
				p.imports[rest] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func TestEveryPackageIsDocumented(t *testing.T) {
	for dir, p := range packages(t) {
		if !p.doc {
			t.Errorf("package %s has no package doc comment", dir)
		}
	}
}

func TestDependenciesPointDown(t *testing.T) {
	for dir, p := range packages(t) {
		for imp := range p.imports {
			if strings.HasPrefix(imp, "cmd/") && !strings.HasPrefix(dir, "cmd/") {
				t.Errorf("%s imports %s: nothing imports cmd", dir, imp)
			}
			ok, listed := allowed[dir]
			if !listed {
				continue
			}
			found := false
			for _, a := range ok {
				if imp == a {
					found = true
				}
			}
			if !found {
				t.Errorf("%s imports %s; it may import only %v", dir, imp, ok)
			}
		}
	}
}

// The layers of the tree, from the top (docs/architecture.md, "The
// layers"). A package may import packages of its own layer or of a layer
// below it, never above.
const (
	layerBelow       = iota // the library and its plumbing: loop, tools, providers, client, api, internal/...
	layerRuntime            // session and the store it runs on
	layerPlatform           // the services beside the runtime: platform/...
	layerFrontDoor          // server (HTTP) and server/ui
	layerApplication        // cmd/hrns and its internal packages
)

var layerNames = []string{"the library", "the runtime", "the platform", "the server", "the application"}

// layer is the layer of the package in dir.
func layer(dir string) int {
	under := func(root string) bool { return dir == root || strings.HasPrefix(dir, root+"/") }
	switch {
	case under("cmd"):
		return layerApplication
	case under("server"):
		return layerFrontDoor
	case under("platform"):
		return layerPlatform
	case under("session"), under("store"):
		return layerRuntime
	}
	return layerBelow
}

// TestLayers fails on an import that runs up the layers (the runtime
// importing the platform, the platform the server, anything the
// command), and on a platform package importing another: each service of
// the platform talks to the runtime alone, through session's API and the
// store, and the server and the command wire them together.
func TestLayers(t *testing.T) {
	for dir, p := range packages(t) {
		for imp := range p.imports {
			if layer(imp) > layer(dir) {
				t.Errorf("%s (%s) imports %s (%s): an import may not run up the layers", dir, layerNames[layer(dir)], imp, layerNames[layer(imp)])
			}
			if layer(dir) == layerPlatform && layer(imp) == layerPlatform && service(dir) != service(imp) {
				t.Errorf("%s imports %s: the platform's services stand apart, each over the runtime", dir, imp)
			}
		}
	}
}

// service is the platform service a package of platform/ belongs to:
// platform/webhook for platform/webhook/webhooktest.
func service(dir string) string {
	parts := strings.SplitN(dir, "/", 3)
	return strings.Join(parts[:min(len(parts), 2)], "/")
}

// TestNothingBelowLinksTheApplication checks, with go list -deps, that no
// package below the application links a package of cmd/ (directly or
// through another), and that the runtime links no package of the
// platform or the server.
func TestNothingBelowLinksTheApplication(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module: not in -short mode")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	cmd := exec.Command(goBin, "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		dir, ok := strings.CutPrefix(fields[0], module+"/")
		if !ok || layer(dir) == layerApplication {
			continue
		}
		checked++
		for _, dep := range fields[1:] {
			d, ok := strings.CutPrefix(dep, module+"/")
			if ok && layer(d) > layer(dir) {
				t.Errorf("%s (%s) links %s (%s)", dir, layerNames[layer(dir)], d, layerNames[layer(d)])
			}
		}
	}
	if checked == 0 {
		t.Fatalf("go list listed no package of %s:\n%s", module, out)
	}
}

// TestClientDoesNotLinkTheRuntime keeps the Go SDK apart from the server
// it talks to: it shares the wire types (package api) and nothing of the
// runtime, directly or through another package.
func TestClientDoesNotLinkTheRuntime(t *testing.T) {
	pkgs := packages(t)
	seen := map[string]bool{}
	var visit func(dir string, path []string)
	visit = func(dir string, path []string) {
		if seen[dir] {
			return
		}
		seen[dir] = true
		for _, forbidden := range []string{"session", "server", "store"} {
			if dir == forbidden || strings.HasPrefix(dir, forbidden+"/") {
				t.Errorf("client imports %s (through %s)", dir, strings.Join(path, " -> "))
			}
		}
		if p := pkgs[dir]; p != nil {
			for imp := range p.imports {
				visit(imp, append(path, imp))
			}
		}
	}
	visit("client", []string{"client"})
}

// TestOnlyStorePostgresImportsPgx keeps the PostgreSQL driver out of the
// library: only store/postgres and its test helper use it.
func TestOnlyStorePostgresImportsPgx(t *testing.T) {
	onlyImports(t, "github.com/jackc/", func(dir string) bool { return dir == "store/postgres" || strings.HasPrefix(dir, "store/postgres/") }, "only store/postgres may use pgx")
}

// TestOnlyOtelImportsOpenTelemetry keeps OpenTelemetry out of the library:
// the loop exposes an observer hook, package otel implements it, and only
// the command sets up exporters.
func TestOnlyOtelImportsOpenTelemetry(t *testing.T) {
	onlyImports(t, "go.opentelemetry.io/", func(dir string) bool {
		return dir == "otel" || dir == "cmd/hrns/internal/cli" || dir == "internal/otlp"
	}, "only otel, internal/otlp and cmd/hrns/internal/cli may use OpenTelemetry")
}

// TestOnlyCmdlineImportsTheShellParser keeps the shell parser out of the
// loop: it parses command lines for permission rules in package
// loop/cmdline, which tools that run commands give the loop through their
// subject (loop.Subject.Parser), so that a program whose tools run no shell
// does not link it.
func TestOnlyCmdlineImportsTheShellParser(t *testing.T) {
	onlyImports(t, "mvdan.cc/sh/", func(dir string) bool { return dir == "loop/cmdline" }, "only loop/cmdline may use the shell parser")
}

// TestOnlyBrowserImportsChromedp keeps the DevTools client in the browser
// package: the rest of hrns uses its tools.
func TestOnlyBrowserImportsChromedp(t *testing.T) {
	onlyImports(t, "github.com/chromedp/", func(dir string) bool { return dir == "browser" }, "only browser may use chromedp")
}

// onlyImports fails for each package, but those allowed, that imports a
// package whose path starts with prefix (its own imports, not its
// dependencies').
func onlyImports(t *testing.T, prefix string, allowed func(dir string) bool, rule string) {
	t.Helper()
	for dir, p := range packages(t) {
		if allowed(dir) {
			continue
		}
		for imp := range p.all {
			if strings.HasPrefix(imp, prefix) {
				t.Errorf("%s imports %s: %s", dir, imp, rule)
			}
		}
	}
}

// TestHrnsLinksNoTextTemplate keeps text/template and gRPC out of the hrns
// binary. text/template's calls of methods by name make the linker keep
// every exported method of every type in the binary (about 7 MB of 53),
// and the process starts the slower for it; it came with gRPC's
// golang.org/x/net/trace. gRPC (with grpc-gateway, protojson and the
// protobuf runtime) came with OpenTelemetry's OTLP exporters, which
// internal/otlp replaced: hrns speaks no gRPC, and every command paid for
// its initialisation. A new dependency that brings either back fails
// here, with the chain of imports that does.
func TestHrnsLinksNoTextTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module: not in -short mode")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./cmd/hrns")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) > 0 {
			imports[fields[0]] = fields[1:]
		}
	}
	root := module + "/cmd/hrns"
	if _, ok := imports[root]; !ok {
		t.Fatalf("go list did not list %s:\n%s", root, out)
	}
	// Breadth first from cmd/hrns: the shortest chain to each package.
	via := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range imports[p] {
			if _, seen := via[imp]; !seen {
				via[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	for _, forbidden := range []string{"text/template", "golang.org/x/net/trace", "google.golang.org/grpc", "google.golang.org/protobuf/proto"} {
		if _, linked := via[forbidden]; !linked {
			continue
		}
		chain := []string{forbidden}
		for p := via[forbidden]; p != ""; p = via[p] {
			chain = append(chain, p)
		}
		slices.Reverse(chain)
		t.Errorf("hrns links %s:\n\t%s", forbidden, strings.Join(chain, "\n\t-> "))
	}
}

// cgoWithFallback lists the packages of hrns's graph that use cgo when it
// is enabled, each of which has a pure-Go version that CGO_ENABLED=0
// builds: the standard library's name resolution (net) and user lookup
// (os/user) through the C library's NSS, the cgo runtime itself, and psx
// (Landlock's all-threads system calls; without cgo it is the runtime's
// syscall.AllThreadsSyscall).
var cgoWithFallback = []string{
	"kernel.org/pub/linux/libs/security/libcap/psx",
	"net",
	"os/user",
	"runtime/cgo",
}

// TestHrnsNeedsNoCLibrary keeps hrns buildable without a C compiler (go
// install builds with CGO_ENABLED=0 where there is none) and keeps C
// libraries out of its start-up: a package that needs cgo adds a library
// for the dynamic loader to map and relocate in every process (and in the
// sandbox's helper, which executes the same binary), and fails the install
// of whoever has no C compiler. The default build links the C library for
// the packages in cgoWithFallback only, and with CGO_ENABLED=0 every
// package of the graph still has its files (go list; it does not compile).
// docs/performance.md says why the build stays the default one rather than
// static.
func TestHrnsNeedsNoCLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module: not in -short mode")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the list is Linux's (psx is Landlock's, and other systems' standard library uses cgo elsewhere)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	list := func(cgo string) string {
		cmd := exec.Command(goBin, "list", "-e", "-deps", "-f",
			"{{.ImportPath}}{{if .CgoFiles}} cgo{{end}}{{if .Error}} error: {{.Error}}{{end}}", "./cmd/hrns")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("CGO_ENABLED=%s go list: %v", cgo, err)
		}
		if !strings.Contains(string(out), module+"/cmd/hrns") {
			t.Fatalf("CGO_ENABLED=%s go list did not list %s:\n%s", cgo, module+"/cmd/hrns", out)
		}
		return string(out)
	}
	var withC []string
	for line := range strings.Lines(list("1")) {
		if p, ok := strings.CutSuffix(strings.TrimSpace(line), " cgo"); ok {
			withC = append(withC, p)
		}
	}
	slices.Sort(withC)
	if !slices.Equal(withC, cgoWithFallback) {
		t.Errorf("the packages of hrns that use cgo are %q, want %q: a new one links a C library into every start, and one without a pure-Go version breaks go install without a C compiler", withC, cgoWithFallback)
	}
	for line := range strings.Lines(list("0")) {
		if strings.Contains(line, " cgo") || strings.Contains(line, " error: ") {
			t.Errorf("with CGO_ENABLED=0: %s", strings.TrimSpace(line))
		}
	}
}
