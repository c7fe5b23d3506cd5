package userdesktop_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/client/userdesktop"
)

// A session whose agent uses the caller's own desktop: the SDK runs its
// computer actions on $DISPLAY, asking on the terminal before each.
func ExampleRun() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", os.Getenv("HRNS_API_KEY"), nil)
	h, err := c.StartSession(ctx, &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "helper", Environments: []client.Environment{{ID: "desktop"}}}},
		Messages: client.Text("Open the calculator and add 2 and 2."),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	in := bufio.NewReader(os.Stdin)
	res, err := userdesktop.Run(ctx, h, &userdesktop.Options{
		Approve: func(ctx context.Context, p *userdesktop.Proposal) (bool, error) {
			fmt.Print(p, "Allow? [y/N] ")
			line, err := in.ReadString('\n')
			return strings.TrimSpace(line) == "y", err
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Answer)
}
