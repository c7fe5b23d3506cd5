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
// helper mode is entered from this package's init function, so any binary
// that imports the package (the hrns command, a test binary) can serve as
// the helper without calling anything: there is no Main to forget.
//
// The helper's first stage is started in a session of its own (the command
// has no controlling terminal) and in new PID, mount and IPC namespaces
// (and a network namespace unless [Spec.AllowNetwork]). It is the
// command's init: it joins a pids cgroup, builds the command's root (a
// read-only tmpfs holding only the paths the command may access, bound at
// their own paths, and a /proc of the new PID namespace), drops root's
// capabilities, starts the command, and reaps. Starting the command is
// the second stage: it sets the rlimits, applies Landlock and a seccomp
// filter that denies the kernel's keyrings (which no namespace of the
// command's separates from the host's), marks every descriptor but the
// standard three close-on-exec (none that the caller inherited reaches
// the command) and execs the command, which keeps the confinement for
// itself and every process it starts. Run by root, the first stage does
// this itself, on a thread of its own that it confines alone (Landlock,
// seccomp and the capability sets are a thread's, and a child inherits
// its thread's) and then lets end: the helper stays outside the
// command's Landlock domain, as a second process would. The second stage
// is a second execution of the binary where that cannot be: a user other
// than root, whose command must enter a nested user namespace (whose ID
// maps the confined helper could not write), an RLIMIT_NPROC to set, or
// an address-space limit too small for the helper's own Go runtime. The
// writable paths are mounted nosuid in the root, and once the command has
// ended [Run] clears the set-user-ID and set-group-ID bits of the files it
// left in them ([Result.SetIDCleared]): run as root, a command cannot
// leave a set-user-ID-root program behind.
//
// The command may read the system directories (/usr, /bin, /lib…, a list of
// harmless files in /etc, its own /proc and a few devices) and
// [Spec.ReadOnly]; it may write only [Spec.Dir], [Spec.Scratch] and
// [Spec.ReadWrite]; a granted path inside a writable one is reached
// without following a link below that one, so what a command leaves there
// cannot widen a later command's grant ([ErrLinkBelowWritable]); the
// root's binds, the overlays and Landlock's rules are made from
// descriptors so opened. Nothing else is in its root: not the files of the host,
// not its pathname Unix sockets, not its other processes, which it can
// neither list nor read. Unless [Spec.AllowNetwork], its network namespace
// has no interfaces but a down loopback, and Landlock denies TCP bind and
// connect (ABI 4 and later); with a [Spec.Proxy], the loopback is up and
// the command reaches beyond it only through the proxy, whose Dial
// decides every destination. Landlock's scoping (ABI 6) keeps it from
// signalling processes outside the sandbox or reaching their abstract Unix
// sockets.
//
// # A Box: one helper for many commands
//
// [NewBox] returns a [Box] for the commands of one sandbox (one spec but
// for each command's own fields). Where it can (isolated, without a
// Proxy, PrivateTmp, Terminals or Unconfined), it runs them in a zygote:
// a first stage started once, its root built, that confines a thread of
// its own once and starts each command from it, one at a time, in an IPC
// namespace of its own, then kills and reaps every other process of its
// PID namespace before the next. For a user other than root each command
// also enters a user namespace of its own, nested in the zygote's, as in
// Run's second stage; its ID maps, which the confined thread cannot
// write, are written by another thread of the zygote while the command is
// stopped, traced, at its exec. A command then costs about what os/exec
// costs; see [Box] for what its commands share.
//
// # What it does not guarantee
//
// See [Confinement] for what a run actually got, and docs/codemode.md. In
// short: where the kernel refuses the namespaces, or the command's root
// cannot be built, the command runs without them (Confinement.Isolated is
// false, and a note says so): it can then see the host's processes and
// reach pathname Unix sockets anywhere. That fall-back is for a machine
// that does not isolate: [Isolation] says whether this one does, and
// where it does, a caller sets [Spec.RequireIsolation], so that a command
// that cannot be isolated is refused ([ErrNotIsolated]) rather than run
// with less than the others (hrns's tools, MCP servers, hooks and desktop
// do); without Landlock (a kernel before 5.13, or Landlock off) nothing but the
// root confines the filesystem, and [Run] says so unless
// [Spec.RequireConfinement] makes it refuse; without a network namespace
// and with Landlock before ABI 10, UDP is not denied; the process count is
// enforced only by a pids cgroup (which needs a writable cgroup file
// system, as for root here) or, for other users, by RLIMIT_NPROC, which
// counts every process of the user; and memory is bounded by address
// space, not resident size.
package sandbox
