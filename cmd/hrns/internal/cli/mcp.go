package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
	"github.com/hrns-dev/hrns/skills"
	"github.com/hrns-dev/hrns/tools"
)

// MCPConfig is the [mcp] table of the config file: the MCP servers whose
// tools "hrns run" offers, next to the built-in ones.
//
//	[mcp.servers.fs]
//	command = "npx"
//	args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
//
//	[mcp.servers.github]
//	url = "https://api.githubcopilot.com/mcp/"
//	headers = { Authorization = "Bearer ${GITHUB_TOKEN}" }
//
// ${VAR} in the values of env and headers is replaced by the variable of
// hrns's environment, so that secrets stay out of the file.
type MCPConfig struct {
	Servers map[string]MCPServer `toml:"servers" yaml:"servers"`
}

// MCPServer configures one MCP server: a command run over stdio, or the URL
// of a Streamable HTTP server.
type MCPServer struct {
	Command string            `toml:"command" yaml:"command"`
	Args    []string          `toml:"args" yaml:"args"`
	Env     map[string]string `toml:"env" yaml:"env"`
	Dir     string            `toml:"dir" yaml:"dir"`
	URL     string            `toml:"url" yaml:"url"`
	Headers map[string]string `toml:"headers" yaml:"headers"`
	// Prefix replaces NAME__ before the tool names; NoPrefix drops it.
	Prefix   string `toml:"prefix" yaml:"prefix"`
	NoPrefix bool   `toml:"no_prefix" yaml:"no_prefix"`
	// Tools lists the only tools to offer, by the server's names.
	Tools []string `toml:"tools" yaml:"tools"`
	// Approval is "auto" (the default: ask unless the server marks the
	// tool read-only), "always" or "never".
	Approval string `toml:"approval" yaml:"approval"`
	// Timeout bounds each call, as a Go duration such as "2m".
	Timeout string `toml:"timeout" yaml:"timeout"`
	// Disabled servers are mounted only when named with --mcp NAME.
	Disabled bool `toml:"disabled" yaml:"disabled"`
}

// spec returns the mcp.Spec of the server called name.
func (s *MCPServer) spec(name string, getenv func(string) string) (*mcp.Spec, error) {
	where := fmt.Sprintf("mcp server %q", name)
	spec := &mcp.Spec{
		Name:     name,
		Command:  s.Command,
		Args:     s.Args,
		Dir:      s.Dir,
		URL:      s.URL,
		Prefix:   s.Prefix,
		NoPrefix: s.NoPrefix,
		Tools:    s.Tools,
	}
	var err error
	if spec.Env, err = expandValues(s.Env, getenv, where+": env"); err != nil {
		return nil, err
	}
	if spec.Headers, err = expandValues(s.Headers, getenv, where+": headers"); err != nil {
		return nil, err
	}
	switch s.Approval {
	case "", "auto":
		spec.Approval = mcp.AskUnlessReadOnly
	case "always":
		spec.Approval = mcp.AskAlways
	case "never":
		spec.Approval = mcp.AskNever
	default:
		return nil, usagef("%s: approval %q is not auto, always or never", where, s.Approval)
	}
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d <= 0 {
			return nil, usagef("%s: timeout %q is not a duration such as 30s or 2m", where, s.Timeout)
		}
		spec.Timeout = d
	}
	return spec, nil
}

var envRefRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`) })

// expandValues replaces ${VAR} in the values of m; a variable that is not
// set is an error, rather than an empty secret sent to a server.
func expandValues(m map[string]string, getenv func(string) string, where string) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		var missing string
		out[k] = envRefRE().ReplaceAllStringFunc(m[k], func(ref string) string {
			name := envRefRE().FindStringSubmatch(ref)[1]
			v := getenv(name)
			if v == "" && missing == "" {
				missing = name
			}
			return v
		})
		if missing != "" {
			return nil, usagef("%s.%s uses ${%s}, which is not set", where, k, missing)
		}
	}
	return out, nil
}

// mcpSpecs returns the servers to mount: those of the config that are not
// disabled, and those of the --mcp flags, each either the name of a
// configured server or "[NAME=]COMMAND ARGS" or "[NAME=]URL".
func mcpSpecs(flags []string, cfg *MCPConfig, getenv func(string) string) ([]*mcp.Spec, error) {
	var servers map[string]MCPServer
	if cfg != nil {
		servers = cfg.Servers
	}
	var specs []*mcp.Spec
	used := map[string]bool{}
	add := func(name string, s *MCPServer) error {
		spec, err := s.spec(name, getenv)
		if err != nil {
			return err
		}
		specs = append(specs, spec)
		used[name] = true
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		if s := servers[name]; !s.Disabled {
			if err := add(name, &s); err != nil {
				return nil, err
			}
		}
	}
	for _, v := range flags {
		v = strings.TrimSpace(v)
		if s, ok := servers[v]; ok {
			if !used[v] {
				if err := add(v, &s); err != nil {
					return nil, err
				}
			}
			continue
		}
		name, s, err := parseMCPFlag(v)
		if err != nil {
			return nil, err
		}
		if name == "" {
			name = uniqueName(deriveName(s), used)
		} else if used[name] {
			return nil, usagef("--mcp %s: a server named %q is already mounted", v, name)
		}
		if err := add(name, s); err != nil {
			return nil, err
		}
	}
	return specs, nil
}

var namedRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z0-9_-]{1,32})=(.*)$`) })

// parseMCPFlag parses "[NAME=]COMMAND ARGS" or "[NAME=]URL".
func parseMCPFlag(v string) (string, *MCPServer, error) {
	name, rest := "", strings.TrimSpace(v)
	if m := namedRE().FindStringSubmatch(rest); m != nil {
		name, rest = m[1], strings.TrimSpace(m[2])
	}
	if rest == "" {
		return "", nil, usagef("--mcp %q: give a command (with its arguments) or an http(s) URL", v)
	}
	if (strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://")) && !strings.ContainsAny(rest, " \t") {
		return name, &MCPServer{URL: rest}, nil
	}
	argv, err := splitCommand(rest)
	if err != nil {
		return "", nil, usagef("--mcp %q: %v", v, err)
	}
	return name, &MCPServer{Command: argv[0], Args: argv[1:]}, nil
}

// splitCommand splits a command line into words as a POSIX shell would,
// with single and double quotes and backslash escapes, but no expansions.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch r {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if escaped {
		return nil, errors.New("trailing backslash")
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	return words, nil
}

// runners are commands that run the server named by a later argument.
var runners = map[string]bool{
	"npx": true, "pnpx": true, "bunx": true, "uvx": true, "uv": true, "pipx": true, "pnpm": true, "yarn": true, "bun": true,
	"dlx": true, "exec": true, "run": true, "tool": true, "node": true, "deno": true, "python": true, "python3": true,
	"docker": true, "podman": true, "go": true, "npm": true, "java": true, "-jar": true,
}

// deriveName names a server mounted with --mcp and no NAME=: the package
// or program it runs, without version, scope and "mcp-server" affixes
// ("npx -y @modelcontextprotocol/server-filesystem ." is "filesystem"), or
// the host of its URL.
func deriveName(s *MCPServer) string {
	word := ""
	if s.URL != "" {
		if u, err := url.Parse(s.URL); err == nil {
			for _, label := range strings.Split(u.Hostname(), ".") {
				if label != "www" && label != "api" && label != "mcp" {
					word = label
					break
				}
			}
		}
	} else {
		for _, a := range append([]string{s.Command}, s.Args...) {
			base := path.Base(strings.ReplaceAll(a, `\`, "/"))
			if strings.HasPrefix(a, "-") || runners[base] || runners[a] {
				continue
			}
			word = a
			break
		}
		word = programName(word)
	}
	word = strings.ToLower(word)
	for _, p := range []string{"mcp-server-", "server-", "mcp-"} {
		word = strings.TrimPrefix(word, p)
	}
	for _, p := range []string{"-mcp-server", "-server", "-mcp", "_mcp"} {
		word = strings.TrimSuffix(word, p)
	}
	var b strings.Builder
	for _, r := range word {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := strings.Trim(b.String(), "_-")
	if len(name) > 28 {
		name = name[:28]
	}
	if name == "" {
		name = "mcp"
	}
	return name
}

// genericNames are path elements that do not tell a server apart.
var genericNames = map[string]bool{
	"index": true, "main": true, "server": true, "cli": true, "dist": true, "build": true,
	"lib": true, "bin": true, "src": true, "out": true, "": true, ".": true,
}

// programName returns the name of the package or program that word
// designates: the last path element that is not generic, without version
// (name@1.2), tag (image:latest) or extension.
func programName(word string) string {
	elems := strings.Split(strings.ReplaceAll(word, `\`, "/"), "/")
	for i := len(elems) - 1; i >= 0; i-- {
		e := elems[i]
		if j := strings.LastIndex(e, "@"); j > 0 {
			e = e[:j] // a version
		}
		e, _, _ = strings.Cut(e, ":") // an image's tag
		for _, ext := range []string{".js", ".mjs", ".cjs", ".ts", ".py", ".exe"} {
			e = strings.TrimSuffix(e, ext)
		}
		if !genericNames[strings.ToLower(e)] {
			return e
		}
	}
	return ""
}

// uniqueName returns name, or name2, name3... if it is taken.
func uniqueName(name string, used map[string]bool) string {
	if !used[name] {
		return name
	}
	for i := 2; ; i++ {
		if n := fmt.Sprintf("%s%d", name, i); !used[n] {
			return n
		}
	}
}

// mountMCP mounts the MCP servers of the config and of the --mcp flags,
// all at once, and returns their tools joined, and a function that stops
// the servers. A server that cannot be mounted fails the whole: the others
// are stopped. Warnings about tools left out go to stderr.
func mountMCP(ctx context.Context, flags []string, cfg *MCPConfig, stdio *IO) (*loop.Toolset, func() error, error) {
	specs, err := mcpSpecs(flags, cfg, stdio.getenv)
	if err != nil {
		return nil, nil, err
	}
	noop := func() error { return nil }
	if len(specs) == 0 {
		return nil, noop, nil
	}
	log := slog.New(slog.NewTextHandler(stdio.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mounted := make([]*mcp.Mounted, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		spec.Logger = log
		wg.Go(func() {
			m, err := mcp.Mount(ctx, spec)
			if err != nil {
				var ie error
				if errors.Is(err, mcp.ErrInvalidSpec) {
					ie = usagef("%v", err)
				}
				errs[i] = cmpOr(ie, err)
				return
			}
			mounted[i] = m
		})
	}
	wg.Wait()
	closeAll := func() error {
		var errs []error
		for _, m := range mounted {
			if m != nil {
				errs = append(errs, m.Close())
			}
		}
		return errors.Join(errs...)
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, nil, err
	}
	sets := make([]*loop.Toolset, len(mounted))
	for i, m := range mounted {
		sets[i] = m.Toolset()
	}
	ts, err := loop.Join(sets...)
	if err != nil {
		closeAll()
		return nil, nil, usagef("mcp servers: %v (set prefix in the config, or name the servers with --mcp NAME=...)", err)
	}
	return ts, closeAll, nil
}

func cmpOr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

const mcpUsage = `Usage:
  hrns mcp serve [flags]        serve hrns tools to MCP clients (stdio, or HTTP with --addr)
  hrns mcp tools [--mcp ...]    list the tools of the configured MCP servers and of --mcp ones

Run "hrns mcp serve -h" for the flags of serve.
`

// mcpCommand runs "hrns mcp".
func mcpCommand(ctx context.Context, args []string, stdio *IO) error {
	if len(args) == 0 {
		return usagef("mcp needs a subcommand\n\n%s", mcpUsage)
	}
	switch args[0] {
	case "serve":
		return mcpServe(ctx, args[1:], stdio)
	case "tools":
		return mcpTools(ctx, args[1:], stdio)
	case "help", "-h", "--help":
		fmt.Fprint(stdio.Out, mcpUsage)
		return nil
	}
	return usagef("unknown mcp subcommand %q\n\n%s", args[0], mcpUsage)
}

// mcpServeOptions are the flags of "hrns mcp serve".
type mcpServeOptions struct {
	config      string
	tools       string
	workdir     string
	addr        string
	allowRemote bool
	yes         bool
	skills      stringList
	noSkills    bool
}

func (o *mcpServeOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.config, "config", "", "config file (default ~/.config/hrns/config.toml or .yaml)")
	fs.StringVar(&o.tools, "tools", "", "comma-separated built-in tools, \"all\" or \"none\" (default "+strings.Join(defaultTools, ",")+")")
	fs.StringVar(&o.workdir, "workdir", ".", "root directory of the file and shell tools")
	fs.StringVar(&o.addr, "addr", "", "serve Streamable HTTP on HOST:PORT at /mcp instead of stdio")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow --addr on an address other machines can reach (clients are not authenticated)")
	fs.BoolVar(&o.yes, "yes", false, "approve every call of tools that require approval, instead of asking the client's user")
	fs.Var(&o.skills, "skills", "a folder of skills to add (repeatable)")
	fs.BoolVar(&o.noSkills, "no-skills", false, "do not discover skills")
}

// Validate checks the options.
func (o *mcpServeOptions) Validate() error {
	fi, err := os.Stat(o.workdir)
	if err != nil || !fi.IsDir() {
		return usagef("--workdir %s is not a directory", o.workdir)
	}
	if o.addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return usagef("--addr %s: %v", o.addr, err)
	}
	if !o.allowRemote && !loopbackHost(host) {
		return usagef("--addr %s can be reached from other machines, and MCP clients are not authenticated: "+
			"use 127.0.0.1:PORT, or pass --allow-remote to accept that risk", o.addr)
	}
	return nil
}

func mcpServe(ctx context.Context, args []string, stdio *IO) error {
	var o mcpServeOptions
	fs := commandFlags("hrns mcp serve", "Usage: hrns mcp serve [flags]\n\nServes hrns tools to MCP clients over stdio, or over Streamable HTTP with --addr.\nWithout --yes, calls of tools that require approval ask the client's user\n(MCP elicitation) and are refused by clients that cannot ask.", stdio)
	o.flags(fs)
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := loadConfig(o.config, stdio.getenv)
	if err != nil {
		return &usageError{err.Error()}
	}
	names := toolNames(o.tools, nil, cfg.Tools)
	if n, had := splitTask(names); had {
		// The client runs its own sub-agents.
		if !slices.Equal(names, allToolNames()) {
			fmt.Fprintln(stdio.Err, "hrns mcp serve: task is not served over MCP; the client runs its own sub-agents")
		}
		names = n
	}
	if i := slices.Index(names, runCodeName); i >= 0 {
		// The client's model calls the tools itself: there is no
		// program of its to run here.
		if all, _ := splitTask(allToolNames()); !slices.Equal(names, all) {
			fmt.Fprintln(stdio.Err, "hrns mcp serve: run_code is not served over MCP; the client calls the other tools directly")
		}
		names = slices.Delete(slices.Clone(names), i, i+1)
	}
	ts, err := tools.ByName(names, &tools.Config{Dir: o.workdir})
	if err != nil {
		return usagef("%v", err)
	}
	instructions := ""
	if ts.Len() > 0 {
		instructions = fmt.Sprintf("The file and shell tools work in the directory %s; paths are relative to it.", absPath(o.workdir))
	}
	if !o.noSkills {
		found, problems := discoverSkills(o.skills, cfg, o.workdir, stdio.getenv)
		for _, p := range problems {
			fmt.Fprintf(stdio.Err, "hrns: skill skipped: %v\n", p)
		}
		if len(found) > 0 {
			if ts, err = loop.Join(ts, skills.Tools(found, nil)); err != nil {
				return err
			}
			instructions = joinPrompts(instructions, skills.PromptSection(found))
		}
	}

	opts := &mcp.ServerOptions{Instructions: instructions, AskClient: !o.yes}
	if o.yes {
		opts.Approver = loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
			if req.Person != "" {
				// --yes approves for no person.
				return loop.Decision{Verdict: loop.Reject, Reason: "only a person may approve this (" + req.Person + "), and hrns mcp serve runs with --yes: nobody is asked"}, nil
			}
			return loop.Decision{Verdict: loop.Approve}, nil
		})
	}
	srv := mcp.NewServer(ts, opts)

	if o.addr == "" {
		t := &sdk.IOTransport{Reader: io.NopCloser(stdio.In), Writer: nopWriteCloser{stdio.Out}}
		if err := srv.Run(ctx, t); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdio.Err, "hrns: serving MCP (Streamable HTTP) at http://%s/mcp with %d tools\n", ln.Addr(), ts.Len())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func absPath(dir string) string {
	o := runOptions{workdir: dir}
	return o.absWorkdir()
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpTools lists the tools of the MCP servers of the config and of --mcp.
func mcpTools(ctx context.Context, args []string, stdio *IO) error {
	fs := flag.NewFlagSet("hrns mcp tools", flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	config := fs.String("config", "", "config file (default ~/.config/hrns/config.toml or .yaml)")
	var flags stringList
	fs.Var(&flags, "mcp", "an MCP server: the name of one in the config, or '[NAME=]COMMAND ARGS' or '[NAME=]URL' (repeatable)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	cfg, err := loadConfig(*config, stdio.getenv)
	if err != nil {
		return &usageError{err.Error()}
	}
	mc := &cfg.MCP
	ts, closeAll, err := mountMCP(ctx, flags, mc, stdio)
	if err != nil {
		return err
	}
	defer closeAll()
	if ts.Len() == 0 {
		fmt.Fprintln(stdio.Out, "No MCP servers: add [mcp.servers.NAME] to the config file, or pass --mcp 'COMMAND ARGS'.")
		return nil
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tAPPROVAL\tDESCRIPTION")
	for def := range ts.All() {
		approval := ""
		if def.RequiresApproval {
			approval = "asks"
		}
		desc, _, _ := strings.Cut(def.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\n", def.Name, approval, clip(desc, 90))
	}
	return tw.Flush()
}
