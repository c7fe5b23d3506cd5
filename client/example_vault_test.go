package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// ExampleClient_CreateVault stores a TOTP seed in a vault, then runs a
// session whose web environment is bound to the vault: the agent asks the
// one_time_code tool for the current code and gets it, never the seed.
// The server is the real one, in process, with a scripted model and a
// fixed clock.
func ExampleClient_CreateVault() {
	var toolResult string
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "one_time_code", `{"entry":"github"}`)}},
		openaitest.Reply{Func: func(body []byte) openaitest.Reply {
			toolResult = string(body)
			return openaitest.Reply{Text: "Signed in."}
		}},
	)
	defer model.Close()
	dir, _ := os.MkdirTemp("", "hrns-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(filepath.Join(dir, "hrns.db"), nil)
	defer st.Close()
	keys, _ := vault.ParseKeys("example:q5Jc0cDUI2pV3ZjGZ4YAbKXm1nFbQPh3mR+H3Cw5W8s=")
	vaults := vault.New(st, keys, &vault.Options{Now: func() time.Time { return time.Date(2026, 6, 1, 15, 14, 5, 0, time.UTC) }})
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		Environments: map[string]*loop.Toolset{"web": {}},
		Vaults:       vaults.SessionTools(),
	})
	m.Start(context.Background())
	defer m.Stop(context.Background())
	h, _ := server.New(m, &server.Options{APIKeys: []string{"sk-example"}, Vaults: vaults})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	c := client.New(srv.URL, "sk-example", nil)
	v, err := c.CreateVault(ctx, &client.VaultCreate{
		Name:           "Support logins",
		ProviderConfig: client.VaultProviderConfig{OpVaultID: "support"},
		Token:          `{"github": "otpauth://totp/GitHub:alice?secret=JBSWY3DPEHPK3PXP&issuer=GitHub"}`,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	health, _ := c.CheckVault(ctx, v.ID)
	fmt.Println(v.Name, "ok:", health.OK)
	res, err := c.RunSession(ctx, &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "signer", Environments: []client.Environment{client.WebWithVault(v.ID)}}},
		Messages: client.Text("Sign in to GitHub."),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Answer)
	fmt.Println("the model read the code:", strings.Contains(toolResult, `\"code\":\"504394\"`), "and the seed:", strings.Contains(toolResult, "JBSWY3DPEHPK3PXP"))
	// Output:
	// Support logins ok: true
	// completed Signed in.
	// the model read the code: true and the seed: false
}
