// Package sandbox runs a command confined: on Linux with Landlock, resource
// limits, a scrubbed environment, a wall-clock timeout that kills the whole
// process group, and capped output.
//
//	res, err := sandbox.Run(ctx, &sandbox.Spec{
//		Shell:   "go test ./...",
//		Dir:     workdir,                       // read-write
//		Scratch: filepath.Join(workdir, ".tmp"), // read-write, created; TMPDIR
//		Env:     []string{"HOME=" + workdir},    // nothing else is inherited
//		Limits:  sandbox.DefaultLimits,
//		Timeout: 5 * time.Minute,
//	})
//	if err != nil { ... }                 // the command could not be started
//	fmt.Println(res.ExitCode, res.Output) // capped: head and tail
//	if !res.Confinement.Confined { ... }  // say so: see Confinement.Summary
//
// # How it confines
//
// Landlock restricts the thread that asks and what it executes, so the
// sandbox applies it in a child: [Run] re-executes the current binary
// (/proc/self/exe) in a helper mode, marked by an environment variable. The
// helper joins a pids cgroup, drops root's capabilities, sets the rlimits,
// applies Landlock and then execs the command, which keeps the confinement
// for itself and every process it starts. The helper mode is entered from
// this package's init function, so any binary that imports the package
// (the hrns command, a test binary) can serve as the helper without calling
// anything: there is no Main to forget.
//
// The command may read the system directories (/usr, /bin, /lib…, a list of
// harmless files in /etc, /proc and /dev) and [Spec.ReadOnly]; it may write
// only [Spec.Dir], [Spec.Scratch] and [Spec.ReadWrite]. Unless
// [Spec.AllowNetwork], it runs in a new network namespace (no interfaces but
// a down loopback) where the kernel allows one, and Landlock denies TCP bind
// and connect (ABI 4 and later). Landlock's scoping (ABI 6) keeps it from
// signalling processes outside the sandbox or reaching their abstract Unix
// sockets, and from reading their /proc files (environ, mem).
//
// # What it does not guarantee
//
// See [Confinement] for what a run actually got, and docs/codemode.md. In
// short: without Landlock (a kernel before 5.13, or Landlock off) nothing
// confines the filesystem, and [Run] says so unless [Spec.RequireConfinement]
// makes it refuse; without a network namespace and with Landlock before ABI
// 10, UDP is not denied; the process count is enforced only by a pids
// cgroup (which needs a writable cgroup file system, as for root here) or,
// for other users, by RLIMIT_NPROC, which counts every process of the user;
// a process that leaves the process group (setsid) and is not in a cgroup
// escapes the final kill; and memory is bounded by address space, not
// resident size.
package sandbox
