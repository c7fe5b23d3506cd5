package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// profileTests are the subtests of [store.Profiles].
var profileTests = []struct {
	name string
	fn   func(t *testing.T, st store.Store)
}{
	{"ProfileLifecycle", testProfileLifecycle},
	{"ProfileScope", testProfileScope},
	{"ProfileUploadToken", testProfileUploadToken},
	{"ProfileDefault", testProfileDefault},
	{"ProfileDefaultConcurrent", testProfileDefaultConcurrent},
	{"ProfileList", testProfileList},
	{"ProfileSaveArchive", testProfileSaveArchive},
}

func profileID(i int) string { return fmt.Sprintf("00000000-0000-4000-9000-%012d", i) }

var profileToken = []byte("hash-of-the-token")

// readyProfile creates a profile of owner for the browser, uploads an
// archive and completes it.
func readyProfile(t *testing.T, st store.Store, id, owner, browser string, created time.Time) *store.Profile {
	t.Helper()
	ctx := t.Context()
	if _, err := st.CreateProfile(ctx, &store.Profile{ID: id, Owner: owner, UploadToken: profileToken, UploadExpires: base.Add(time.Hour), CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutProfileUpload(ctx, id, profileToken, base, []byte("archive of "+id)); err != nil {
		t.Fatal(err)
	}
	p, err := st.CompleteProfile(ctx, &store.Profile{ID: id, Owner: owner, Name: "p " + id, BrowserName: browser, BrowserVersion: "140", SizeBytes: 10, Checksum: "c"}, []byte("archive of "+id))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testProfileLifecycle(t *testing.T, st store.Store) {
	ctx := t.Context()
	id := profileID(1)
	created, err := st.CreateProfile(ctx, &store.Profile{ID: id, Owner: "alice", UploadToken: profileToken, UploadExpires: base.Add(time.Hour), CreatedAt: base})
	if err != nil {
		t.Fatal(err)
	}
	if created.Ready || !created.CreatedAt.Equal(base) || !created.UpdatedAt.Equal(base) {
		t.Errorf("created %+v", created)
	}
	got, err := st.GetProfile(ctx, "alice", id)
	if err != nil || got.Ready || string(got.UploadToken) != string(profileToken) || !got.UploadExpires.Equal(base.Add(time.Hour)) {
		t.Fatalf("pending: %+v %v", got, err)
	}
	if a, err := st.ProfileArchive(ctx, "alice", id); err != nil || a != nil {
		t.Errorf("archive before the upload: %q %v", a, err)
	}
	// Completing without an upload finds nothing to complete.
	if _, err := st.CompleteProfile(ctx, &store.Profile{ID: id, Owner: "alice", Name: "n", BrowserName: "chromium", BrowserVersion: "1"}, nil); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("complete without an upload: %v", err)
	}
	// A pending profile is not listed, made default or used.
	if page, total, err := st.ListProfiles(ctx, &store.ProfileListParams{Owner: "alice"}); err != nil || total != 0 || len(page) != 0 {
		t.Errorf("list with a pending profile: %d %v", total, err)
	}
	if _, err := st.SetDefaultProfile(ctx, "alice", id, true); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("default of a pending profile: %v", err)
	}
	if err := st.UseProfile(ctx, "alice", id, base); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("use of a pending profile: %v", err)
	}
	if ready, pending, err := st.CountProfiles(ctx, "alice", base); err != nil || ready != 0 || pending != 1 {
		t.Errorf("count: %d %d %v", ready, pending, err)
	}

	archive := []byte{0x50, 0x4b, 0x00, 0xff, 0x10}
	if err := st.PutProfileUpload(ctx, id, profileToken, base, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutProfileUpload(ctx, id, profileToken, base, archive); err != nil {
		t.Fatal(err)
	}
	archive[0] = 0 // the store kept a copy
	if a, err := st.ProfileArchive(ctx, "alice", id); err != nil || string(a) != "\x50\x4b\x00\xff\x10" {
		t.Errorf("archive %q %v", a, err)
	}
	// An archive other than the upload (one replaced after it was
	// checked) is not made ready.
	if _, err := st.CompleteProfile(ctx, &store.Profile{ID: id, Owner: "alice", Name: "n", BrowserName: "chromium", BrowserVersion: "1"}, []byte("first")); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("complete with another archive: %v", err)
	}
	archive[0] = 0x50
	desc := "Logged in to the shop"
	done, err := st.CompleteProfile(ctx, &store.Profile{ID: id, Owner: "alice", Name: "shop", Description: &desc, BrowserName: "chromium",
		BrowserVersion: "140.0", Labels: json.RawMessage(`{"team":"ops"}`), SizeBytes: 5, Checksum: "abc"}, archive)
	if err != nil {
		t.Fatal(err)
	}
	if !done.Ready || done.Name != "shop" || done.Description == nil || *done.Description != desc || done.BrowserName != "chromium" ||
		done.BrowserVersion != "140.0" || string(done.Labels) != `{"team":"ops"}` || done.SizeBytes != 5 || done.Checksum != "abc" ||
		done.IsDefault || done.UsageCount != 0 || done.LastUsedAt != nil || !done.CreatedAt.Equal(base) {
		t.Errorf("completed %+v", done)
	}
	// Completed once: no second completion, no upload.
	if _, err := st.CompleteProfile(ctx, &store.Profile{ID: id, Owner: "alice", Name: "again", BrowserName: "chromium", BrowserVersion: "1"}, archive); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("second completion: %v", err)
	}
	if err := st.PutProfileUpload(ctx, id, profileToken, base, []byte("late")); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("upload after completion: %v", err)
	}
	at := base.Add(time.Minute)
	if err := st.UseProfile(ctx, "alice", id, at); err != nil {
		t.Fatal(err)
	}
	if err := st.UseProfile(ctx, "alice", id, at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err = st.GetProfile(ctx, "alice", id)
	if err != nil || got.UsageCount != 2 || got.LastUsedAt == nil || !got.LastUsedAt.Equal(at.Add(time.Second)) || got.Description == nil {
		t.Fatalf("after use: %+v %v", got, err)
	}
	if ready, pending, err := st.CountProfiles(ctx, "alice", base); err != nil || ready != 1 || pending != 0 {
		t.Errorf("count: %d %d %v", ready, pending, err)
	}
	if err := st.DeleteProfile(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetProfile(ctx, "alice", id); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("after delete: %v", err)
	}
	if _, err := st.ProfileArchive(ctx, "alice", id); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("archive after delete: %v", err)
	}
	if err := st.DeleteProfile(ctx, "alice", id); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("second delete: %v", err)
	}
}

func testProfileScope(t *testing.T, st store.Store) {
	ctx := t.Context()
	id := profileID(2)
	readyProfile(t, st, id, "alice", "chromium", base)
	if _, err := st.GetProfile(ctx, "bob", id); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("bob reads alice's profile: %v", err)
	}
	if _, err := st.ProfileArchive(ctx, "bob", id); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("bob reads alice's archive: %v", err)
	}
	if _, err := st.SetDefaultProfile(ctx, "bob", id, true); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("bob makes alice's profile his default: %v", err)
	}
	if err := st.UseProfile(ctx, "bob", id, base); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("bob uses alice's profile: %v", err)
	}
	if _, err := st.CompleteProfile(ctx, &store.Profile{ID: id, Owner: "bob", Name: "x", BrowserName: "chromium", BrowserVersion: "1"}, []byte("archive of "+id)); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("bob completes alice's profile: %v", err)
	}
	if err := st.DeleteProfile(ctx, "bob", id); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("bob deletes alice's profile: %v", err)
	}
	if page, total, err := st.ListProfiles(ctx, &store.ProfileListParams{Owner: "bob"}); err != nil || total != 0 || len(page) != 0 {
		t.Errorf("bob's list: %d %v", total, err)
	}
	if _, err := st.GetProfile(ctx, "alice", id); err != nil {
		t.Errorf("alice's profile after bob's attempts: %v", err)
	}
}

func testProfileUploadToken(t *testing.T, st store.Store) {
	ctx := t.Context()
	id := profileID(3)
	if _, err := st.CreateProfile(ctx, &store.Profile{ID: id, Owner: "alice", UploadToken: profileToken, UploadExpires: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutProfileUpload(ctx, id, []byte("another hash"), base, []byte("x")); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("a wrong token: %v", err)
	}
	if err := st.PutProfileUpload(ctx, id, nil, base, []byte("x")); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("no token: %v", err)
	}
	if err := st.PutProfileUpload(ctx, id, profileToken, base.Add(time.Hour), []byte("x")); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("an expired upload: %v", err)
	}
	if err := st.PutProfileUpload(ctx, profileID(99), profileToken, base, []byte("x")); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("an unknown profile: %v", err)
	}
	if a, _ := st.ProfileArchive(ctx, "alice", id); a != nil {
		t.Errorf("a refused upload was stored: %q", a)
	}
	if ready, pending, err := st.CountProfiles(ctx, "alice", base.Add(time.Hour)); err != nil || ready != 0 || pending != 0 {
		t.Errorf("count after expiry: %d %d %v", ready, pending, err)
	}
	readyProfile(t, st, profileID(4), "alice", "chromium", base)
	n, err := st.DeleteExpiredUploads(ctx, base.Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpiredUploads = %d, %v", n, err)
	}
	if _, err := st.GetProfile(ctx, "alice", id); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("the expired upload is left: %v", err)
	}
	if _, err := st.GetProfile(ctx, "alice", profileID(4)); err != nil {
		t.Errorf("a ready profile went with the expired uploads: %v", err)
	}
}

func testProfileDefault(t *testing.T, st store.Store) {
	ctx := t.Context()
	a := readyProfile(t, st, profileID(5), "alice", "chromium", base)
	b := readyProfile(t, st, profileID(6), "alice", "chromium", base.Add(time.Second))
	c := readyProfile(t, st, profileID(7), "alice", "firefox", base.Add(2*time.Second))
	if _, err := st.DefaultProfile(ctx, "alice", "chromium"); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("no default yet: %v", err)
	}
	for _, p := range []*store.Profile{a, c, b} {
		got, err := st.SetDefaultProfile(ctx, "alice", p.ID, true)
		if err != nil || !got.IsDefault || got.ID != p.ID {
			t.Fatalf("set default %s: %+v %v", p.ID, got, err)
		}
	}
	def, err := st.DefaultProfile(ctx, "alice", "chromium")
	if err != nil || def.ID != b.ID {
		t.Fatalf("chromium default: %+v %v", def, err)
	}
	if got, _ := st.GetProfile(ctx, "alice", a.ID); got.IsDefault {
		t.Error("the replaced default is still marked")
	}
	if def, err := st.DefaultProfile(ctx, "alice", "firefox"); err != nil || def.ID != c.ID {
		t.Errorf("firefox default: %+v %v", def, err)
	}
	if _, err := st.DefaultProfile(ctx, "bob", "chromium"); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("bob has alice's default: %v", err)
	}
	got, err := st.SetDefaultProfile(ctx, "alice", b.ID, false)
	if err != nil || got.IsDefault {
		t.Fatalf("unset: %+v %v", got, err)
	}
	if _, err := st.DefaultProfile(ctx, "alice", "chromium"); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("default after unset: %v", err)
	}
	// Unsetting a profile that is not the default changes nothing.
	if got, err := st.SetDefaultProfile(ctx, "alice", a.ID, false); err != nil || got.IsDefault {
		t.Errorf("unset a non-default: %+v %v", got, err)
	}
}

func testProfileDefaultConcurrent(t *testing.T, st store.Store) {
	ctx := t.Context()
	var ids []string
	for i := range 6 {
		ids = append(ids, readyProfile(t, st, profileID(10+i), "alice", "chromium", base.Add(time.Duration(i)*time.Second)).ID)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if _, err := st.SetDefaultProfile(ctx, "alice", id, true); err != nil {
				t.Errorf("set default %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	page, _, err := st.ListProfiles(ctx, &store.ProfileListParams{Owner: "alice", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range page {
		if p.IsDefault {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d defaults after concurrent sets, want 1", n)
	}
}

func testProfileList(t *testing.T, st store.Store) {
	ctx := t.Context()
	for i := range 5 {
		readyProfile(t, st, profileID(20+i), "alice", "chromium", base.Add(time.Duration(i)*time.Second))
	}
	readyProfile(t, st, profileID(30), "bob", "chromium", base)
	page, total, err := st.ListProfiles(ctx, &store.ProfileListParams{Owner: "alice", Offset: 1, Limit: 3})
	if err != nil || total != 5 || len(page) != 3 {
		t.Fatalf("page: %d of %d, %v", len(page), total, err)
	}
	for i, want := range []string{profileID(23), profileID(22), profileID(21)} {
		if page[i].ID != want || page[i].Owner != "alice" {
			t.Errorf("page[%d] = %s, want %s (newest first)", i, page[i].ID, want)
		}
	}
	if page, _, _ := st.ListProfiles(ctx, &store.ProfileListParams{Owner: "alice"}); len(page) != 5 {
		t.Errorf("default limit: %d", len(page))
	}
}

// testProfileSaveArchive: a ready profile's archive is replaced whole,
// with its size, checksum and update time, only by its owner, never for
// a pending or deleted one; of concurrent writes, the last to commit
// wins whole (the archive and its checksum are of the same write).
func testProfileSaveArchive(t *testing.T, st store.Store) {
	ctx := t.Context()
	id := profileID(40)
	readyProfile(t, st, id, "alice", "chromium", base)
	at := base.Add(time.Minute)
	p, err := st.SaveProfileArchive(ctx, "alice", id, []byte("new archive"), "sum-new", at)
	if err != nil || p.SizeBytes != int64(len("new archive")) || p.Checksum != "sum-new" || !p.UpdatedAt.Equal(at) || !p.Ready || p.Name != "p "+id {
		t.Fatalf("saved %+v, %v", p, err)
	}
	if a, err := st.ProfileArchive(ctx, "alice", id); err != nil || string(a) != "new archive" {
		t.Errorf("archive %q, %v", a, err)
	}
	if _, err := st.SaveProfileArchive(ctx, "bob", id, []byte("bob's"), "x", at); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("bob saves into alice's profile: %v", err)
	}
	pending := profileID(41)
	if _, err := st.CreateProfile(ctx, &store.Profile{ID: pending, Owner: "alice", UploadToken: profileToken, UploadExpires: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveProfileArchive(ctx, "alice", pending, []byte("x"), "x", at); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("saving into a pending profile: %v", err)
	}
	if a, err := st.ProfileArchive(ctx, "alice", id); err != nil || string(a) != "new archive" {
		t.Errorf("archive after refused writes: %q, %v", a, err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			a := fmt.Sprintf("archive %d", i)
			if _, err := st.SaveProfileArchive(ctx, "alice", id, []byte(a), fmt.Sprintf("sum %d", i), at.Add(time.Duration(i)*time.Second)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	p, err = st.GetProfile(ctx, "alice", id)
	a, aerr := st.ProfileArchive(ctx, "alice", id)
	if err != nil || aerr != nil || "sum "+strings.TrimPrefix(string(a), "archive ") != p.Checksum || p.SizeBytes != int64(len(a)) {
		t.Errorf("after concurrent saves: archive %q, profile %+v (%v, %v)", a, p, err, aerr)
	}
	if err := st.DeleteProfile(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveProfileArchive(ctx, "alice", id, []byte("late"), "x", at); !errors.Is(err, store.ErrProfileNotFound) {
		t.Errorf("saving into a deleted profile: %v", err)
	}
}
