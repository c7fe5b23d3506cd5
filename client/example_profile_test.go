package client_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// ExampleClient_UploadBrowserProfile uploads a Chromium user-data
// directory (here a tiny one, archived in memory; in practice
// `cd ~/.config/chromium && zip -r profile.zip .`) and makes it the key's
// default, so that sessions whose web environment says
// use_default_browser_profile (client.WebWithProfile("")) start signed in.
func ExampleClient_UploadBrowserProfile() {
	dir, _ := os.MkdirTemp("", "hrns-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(filepath.Join(dir, "hrns.db"), nil)
	defer st.Close()
	h, _ := server.New(session.New(st, llmtest.NewModel(), nil), &server.Options{APIKeys: []string{"sk-example"}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	var archive bytes.Buffer
	zw := zip.NewWriter(&archive)
	for _, name := range []string{"Local State", "Default/Cookies", "Default/Preferences"} {
		w, _ := zw.Create(name)
		w.Write([]byte("{}"))
	}
	zw.Close()

	ctx := context.Background()
	c := client.New(srv.URL, "sk-example", nil)
	p, err := c.UploadBrowserProfile(ctx, archive.Bytes(), &client.BrowserProfileCreate{Name: "shop account", BrowserVersion: "140"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.SetDefaultBrowserProfile(ctx, p.ID); err != nil {
		fmt.Println(err)
		return
	}
	d, _ := c.DefaultBrowserProfile(ctx, "chromium")
	fmt.Println(d.Name, d.BrowserName, d.IsDefault, *d.FileSizeBytes == int64(archive.Len()))
	// Output: shop account chromium true true
}
