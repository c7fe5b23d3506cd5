//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/hrns-dev/hrns/sandbox"
)

func ExampleRun() {
	dir, err := os.MkdirTemp("", "sandbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	res, err := sandbox.Run(context.Background(), &sandbox.Spec{
		Shell:  "echo hello from $WHO; echo $HOME; exit 3",
		Dir:    dir,
		Env:    []string{"WHO=the sandbox"}, // HOME is not inherited
		Limits: sandbox.DefaultLimits,
	})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Output)
	fmt.Println("exit code", res.ExitCode)
	// Output:
	// hello from the sandbox
	//
	// exit code 3
}

// ExampleProxy gives a command the network through a proxy alone: its
// Dial refuses every destination but one server (here, on this machine's
// loopback, which the command could not reach otherwise).
func ExampleProxy() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello through the proxy")
	}))
	defer srv.Close()
	allowed := srv.Listener.Addr().String()
	dir, err := os.MkdirTemp("", "sandbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	proxy := &sandbox.Proxy{Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		if address != allowed {
			return nil, fmt.Errorf("%w: %s", sandbox.ErrDestinationRefused, address)
		}
		return (&net.Dialer{}).DialContext(ctx, network, address)
	}}
	res, err := sandbox.Run(context.Background(), &sandbox.Spec{
		// NO_PROXY names the command's own loopback: ask for the proxy.
		Shell: "curl -s --noproxy '' http://" + allowed + "/; curl -s -o /dev/null -w '%{http_code}\\n' --noproxy '' http://192.168.1.1/",
		Dir:   dir,
		Proxy: proxy,
	})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Output)
	fmt.Println("network:", res.Confinement.Network)
	// Output:
	// hello through the proxy
	// 403
	// network: namespace+proxy
}
