package realm

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"relay/federation"
	"relay/protocol"
	"relay/realm/backup"
	"relay/store"
	"relay/testnet/cputime"
)

// exportReads are the reads a restore must answer exactly as the original
// node did: every projection of both protocols, rebuilt from the log.
var exportReads = []string{
	"/api/v1/boards",
	"/api/v1/boards/2",
	"/api/v1/boards/1/threads",
	"/api/v1/threads",
	"/api/v1/threads/th_1",
	"/api/v1/threads/th_1/events",
	"/api/v1/threads/th_1/claims",
	"/api/v1/threads/th_2",
	"/api/v1/claims/cl_1",
	"/api/v1/claims/cl_2",
	"/messages",
	"/conversations",
	"/tags",
	"/corpus/changes.jsonl?after=0",
	"/search?q=agents",
}

// fillNode writes boards, threads, claims, attestations, a seal, a closed
// thread, an image and corpus conversations with relationships, through the
// HTTP API. It returns reads of what it wrote (the image, a conversation
// and its relationships) and a corpus author.
func fillNode(t *testing.T, tn *testNode) (reads []string, author string) {
	t.Helper()
	a := tn.issue(t, "asker", "write")
	b := tn.issue(t, "answerer", "write")
	tn.post(t, tn.operator, "/api/v1/boards", map[string]any{"slug": "eng", "name": "Engineering"})
	tn.post(t, a, "/api/v1/boards/1/threads", map[string]any{
		"kind": "ask", "body": "Does caching lower latency?",
		"claims": []any{map[string]any{"statement": "Caching always lowers latency.", "evidence": []any{map[string]any{"kind": "note", "value": "folklore"}}}},
	})
	tn.post(t, b, "/api/v1/threads/th_1/messages", map[string]any{
		"kind": "answer", "body": "With a warm cache, yes.", "parent": "msg_1",
		"claims": []any{map[string]any{"statement": "A warm cache halves p50 latency.", "evidence": []any{map[string]any{"kind": "url", "value": "https://example.org/run/1"}}}},
	})
	tn.post(t, a, "/api/v1/claims/cl_2/attest", map[string]any{"verdict": "supports"})
	tn.post(t, tn.operator, "/api/v1/claims/cl_2/seal", map[string]any{})
	tn.post(t, a, "/api/v1/threads/th_1/messages", map[string]any{"kind": "decide", "body": "Cache on, with a warm-up."})
	tn.post(t, a, "/api/v1/threads/th_1/close", map[string]any{})
	out := tn.post(t, b, "/api/v1/boards/eng/threads", map[string]any{"kind": "note", "body": "a picture",
		"image": map[string]any{"data": base64.StdEncoding.EncodeToString(noisePNG(t))}})
	reads = append(reads, field(out, "message", "image", "url").(string))

	ag := tn.registerAgent(t, true)
	_, c1, _ := tn.write(t, ag, "/createConversation", "1", map[string]any{"subject": "AI agents", "content": "How should agents talk?", "tags": []string{"agents"}})
	_, m2, _ := tn.write(t, ag, "/appendToConversation/"+c1["conversation_id"].(string), "2", map[string]any{"content": "Through an append-only corpus."})
	status, _, _ := tn.write(t, ag, "/createRelationship", "3", map[string]any{"source_message_id": m2["message_id"], "target_message_id": c1["message_id"], "relationship_type": "supports"})
	if status != 201 {
		t.Fatalf("relationship: %d", status)
	}
	conv := c1["conversation_id"].(string)
	reads = append(reads, "/conversations/"+conv, "/relationship-assertions?conversation_id="+conv, "/messages/"+m2["message_id"].(string))
	return reads, ag.author
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// exportOf exports the stopped node in dir.
func exportOf(t *testing.T, dir string, withKey, compress bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	res, err := Export(context.Background(), ExportConfig{DataDir: dir, Out: &buf, WithKey: withKey, Compress: compress, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != int64(buf.Len()) || res.Events == 0 || res.Realms != 1 {
		t.Fatalf("export result %+v, %d bytes", res, buf.Len())
	}
	return buf.Bytes()
}

func TestExportImportRoundTrip(t *testing.T) {
	src := t.TempDir()
	tn := startNodeAt(t, "ainotes", src)
	more, author := fillNode(t, tn)
	want := map[string][]byte{}
	for _, p := range append(exportReads, more...) {
		status, body, _ := tn.get(t, p, nil)
		if status != 200 {
			t.Fatalf("GET %s: %d %s", p, status, body)
		}
		want[p] = body
	}
	wantHeads, _ := tn.Store().Heads()
	wantSeq := tn.Store().Sequence()
	_, profile := tn.do(t, "GET", "/agents/"+author, "", nil)
	oldOperator := tn.operator

	// A running node's store is locked: export says so.
	if _, err := Export(context.Background(), ExportConfig{DataDir: src, Out: io.Discard, Logger: quiet()}); !errors.Is(err, ErrNodeRunning) {
		t.Fatalf("export of a running node: %v", err)
	}
	tn.srv.Close()
	tn.Close()

	for _, compress := range []bool{false, true} {
		file := exportOf(t, src, true, compress)
		dst := filepath.Join(t.TempDir(), "restored")
		var calls int
		res, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Logger: quiet(),
			Progress: func(backup.Progress) { calls++ }})
		if err != nil {
			t.Fatal(err)
		}
		if res.Realm != "ainotes" || res.Events != wantSeq || res.Blobs != 1 || calls == 0 || res.OperatorTokenFile != filepath.Join(dst, "operator.token") {
			t.Fatalf("import result %+v (progress called %d times)", res, calls)
		}
		if _, err := os.Stat(filepath.Join(dst, importPartial)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left behind: %v", importPartial, err)
		}
		rn := startNodeAt(t, "", dst)
		if rn.Realm() != "ainotes" || rn.PeerID() != tn.PeerID() {
			t.Fatalf("restored as %s %s, want ainotes %s", rn.Realm(), rn.PeerID(), tn.PeerID())
		}
		heads, _ := rn.Store().Heads()
		if len(heads) != 1 || heads["ainotes"] != wantHeads["ainotes"] || rn.Store().Sequence() != wantSeq {
			t.Fatalf("heads %v sequence %d, want %v %d", heads, rn.Store().Sequence(), wantHeads, wantSeq)
		}
		for p, body := range want {
			if status, got, _ := rn.get(t, p, nil); status != 200 || !bytes.Equal(got, body) {
				t.Fatalf("GET %s after restore: %d\n%s\nwant\n%s", p, status, got, body)
			}
		}
		// Registrations are local: the author's activity is restored, its
		// registration (credential, time) is not; its name, made from its
		// author id, is the same.
		if _, got := rn.do(t, "GET", "/agents/"+author, "", nil); field(got, "agent", "statistics", "message_count") != field(profile, "agent", "statistics", "message_count") ||
			field(got, "agent", "agent_name") != field(profile, "agent", "agent_name") || field(got, "agent", "registered_at") != nil {
			t.Fatalf("profile after restore: %v", got)
		}

		// The old operator secret is gone; the fresh one acts as the human.
		if status, _ := rn.do(t, "GET", "/api/v1/tokens", oldOperator, nil); status != 401 {
			t.Fatalf("the old operator secret: %d", status)
		}
		// The realm goes on: its chain from the restored head, its numbers
		// after the restored ones.
		w := rn.issue(t, "after", "write")
		out := rn.post(t, w, "/api/v1/boards/1/threads", map[string]any{"kind": "ask", "body": "Still here?",
			"claims": []any{map[string]any{"statement": "The restore kept everything.", "evidence": []any{map[string]any{"kind": "note", "value": "this test"}}}}})
		if field(out, "thread", "id") != "th_3" || field(out, "message", "id") != "msg_5" {
			t.Fatalf("after restore: %v", out)
		}
		if _, cl := rn.do(t, "GET", "/api/v1/claims/cl_3", "", nil); field(cl, "claim", "statement") != "The restore kept everything." {
			t.Fatalf("claim numbering after restore: %v", cl)
		}
		if b := rn.post(t, rn.operator, "/api/v1/boards", map[string]any{"slug": "ops", "name": "Ops"}); field(b, "board", "id") != float64(3) {
			t.Fatalf("board numbering after restore: %v", b)
		}
		se, err := rn.Store().EventAt("ainotes", wantHeads["ainotes"].Seq+1)
		if err != nil || !se.Event.Prev.Cid.Equals(wantHeads["ainotes"].CID) {
			t.Fatalf("the chain does not go on from the restored head: %v", err)
		}
	}
}

// A file exported without the key restores only with the realm's
// realm.key given, and only with the right one.
func TestImportKey(t *testing.T) {
	src := t.TempDir()
	tn := startNodeAt(t, "ainotes", src)
	tn.Close()
	file := exportOf(t, src, false, false)
	keyFile, err := os.ReadFile(filepath.Join(src, "realm.key"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := federation.IdentityFromSeed(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := other.Marshal()

	dst := t.TempDir()
	_, err = Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Logger: quiet()})
	if !errors.Is(err, ErrNoRealmKey) {
		t.Fatalf("no key: %v", err)
	}
	assertEmpty(t, dst)
	if _, err = Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Key: otherKey, Logger: quiet()}); err == nil {
		t.Fatal("another realm's key was accepted")
	}
	assertEmpty(t, dst)
	res, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Key: keyFile, Logger: quiet()})
	if err != nil || res.PeerID != tn.PeerID() {
		t.Fatalf("with realm.key: %+v %v", res, err)
	}
	// Now dst holds a node: a second import is refused, and leaves it be.
	if _, err = Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Key: keyFile, Logger: quiet()}); err == nil {
		t.Fatal("import into a non-empty directory")
	}
	if _, err := os.Stat(filepath.Join(dst, "realm.json")); err != nil {
		t.Fatal(err)
	}
}

// Damaged, forged or broken files are refused with a clear error, and leave
// nothing behind: not even what was stored before the damage was found.
func TestImportRefusesDamage(t *testing.T) {
	src := t.TempDir()
	tn := startNodeAt(t, "ainotes", src)
	fillNode(t, tn)
	tn.Close()
	file := exportOf(t, src, true, false)
	forger, err := federation.IdentityFromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	forgerKey, _ := forger.Marshal()

	var damageTests = []struct {
		name string
		file []byte
		want error
	}{
		{"flipped byte", flip(file, len(file)/2), backup.ErrCorrupt},
		{"truncated before the trailer", file[:len(file)-20], backup.ErrCorrupt},
		{"truncated in the events", file[:len(file)/3], backup.ErrCorrupt},
		{"an event dropped", rewrite(t, file, func(f *backup.Frame, n int) bool { return f.Kind != backup.KindEvent || n != 5 }, nil), protocol.ErrChainBroken},
		{"signed by another key", rewrite(t, file, nil, func(f *backup.Frame) {
			switch f.Kind {
			case backup.KindKey:
				f.Key.Public = forger.Public()
			case backup.KindSecret:
				f.Secret.Key = forgerKey
			}
		}), protocol.ErrBadSignature},
		{"not an export", []byte("hello"), backup.ErrNotExport},
	}
	for _, tc := range damageTests {
		dst := t.TempDir()
		_, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(tc.file), Logger: quiet()})
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		assertEmpty(t, dst)
	}
	// A directory the refused import made is not left behind.
	made := filepath.Join(t.TempDir(), "new")
	if _, err := Import(context.Background(), ImportConfig{DataDir: made, In: bytes.NewReader([]byte("hello")), Logger: quiet()}); err == nil {
		t.Fatal("not an export imported")
	}
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Fatalf("the refused import left %s: %v", made, err)
	}
	// The refused directory takes a good import afterwards.
	dst := t.TempDir()
	if _, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file[:len(file)-1]), Logger: quiet()}); err == nil {
		t.Fatal("cut file imported")
	}
	if _, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
}

// An import that stopped half-way (a crash: import.partial left behind)
// stops the node from opening there, and a new import clears it.
func TestImportInterrupted(t *testing.T) {
	src := t.TempDir()
	tn := startNodeAt(t, "ainotes", src)
	tn.Close()
	file := exportOf(t, src, true, false)
	dst := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dst, importPartial, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.DataDir, cfg.Logger = dst, quiet()
	if _, err := Open(context.Background(), cfg); err == nil {
		t.Fatal("a node opened on an unfinished import")
	}
	// While an import runs (its store locked), another one is refused.
	scfg := store.DefaultConfig(filepath.Join(dst, importPartial, "store"))
	scfg.Logger = quiet()
	running, err := store.Open(scfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "running") {
		t.Fatalf("import beside a running one: %v", err)
	}
	running.Close()
	// Stopped between its moves: the store and the key already out of the
	// stage, the realm file not yet.
	for _, name := range []string{"store", "realm.key"} {
		if err := os.Rename(filepath.Join(dst, importPartial, name), filepath.Join(dst, name)); err != nil && name == "store" {
			t.Fatal(err)
		} else if err != nil {
			os.WriteFile(filepath.Join(dst, name), []byte("k"), 0o600)
		}
	}
	if _, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
}

// TestImportDiskFull: an import onto a disk without room to go on stops with
// store.ErrDiskFull and leaves nothing, rather than fill the disk: Badger,
// writing through memory maps into a full disk, ended the process with
// SIGBUS as it flushed the failed store, leaving import.partial behind.
func TestImportDiskFull(t *testing.T) {
	src := t.TempDir()
	tn := startNodeAt(t, "ainotes", src)
	fillNode(t, tn)
	tn.srv.Close()
	tn.Close()
	file := exportOf(t, src, true, false)
	dst := filepath.Join(t.TempDir(), "restored")
	_, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Logger: quiet(), MinFreeBytes: 1 << 62})
	if !errors.Is(err, store.ErrDiskFull) || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("import onto a full disk: %v, want %v", err, store.ErrDiskFull)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused import left %s: %v", dst, err)
	}
	if _, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Logger: quiet()}); err != nil {
		t.Fatalf("import once there is room: %v", err)
	}
}

// The store of a node that follows other realms holds their chains too: an
// export carries them with the keys a KeySource (the realm directory) gives,
// and an import verifies them against those keys and against the keys the
// importing node already trusts.
func TestExportImportOtherRealms(t *testing.T) {
	src := t.TempDir()
	tn := startNodeAt(t, "ainotes", src)
	away, err := federation.IdentityFromSeed(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	var prev protocol.Head
	for i := 1; i <= 3; i++ {
		ev := &protocol.Event{Realm: "away", Seq: uint64(i), Type: "t.remote", At: int64(i), Author: "away:bot", Data: []byte{0xa0}}
		if prev.Seq > 0 {
			ev.Prev = protocol.Link{Cid: prev.CID}
		}
		raw, c, err := ev.Sign(away.Signing)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tn.Store().Ingest(context.Background(), raw, func(e *protocol.Event) error { return e.Verify(away.Public()) }); err != nil {
			t.Fatal(err)
		}
		prev = protocol.Head{Seq: uint64(i), CID: c}
	}
	tn.Close()

	if _, err := Export(context.Background(), ExportConfig{DataDir: src, Out: io.Discard, Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "realm away") {
		t.Fatalf("export without away's key: %v", err)
	}
	directory := func(r protocol.Realm) (ed25519.PublicKey, bool) {
		if r == "away" {
			return away.Public(), true
		}
		return nil, false
	}
	var buf bytes.Buffer
	res, err := Export(context.Background(), ExportConfig{DataDir: src, Out: &buf, WithKey: true, Keys: directory, Logger: quiet()})
	if err != nil || res.Realms != 2 || res.Heads["away"] != prev {
		t.Fatalf("export: %+v %v", res, err)
	}
	file := buf.Bytes()

	liar := func(r protocol.Realm) (ed25519.PublicKey, bool) { return pubKey(9), r == "away" }
	dst := t.TempDir()
	if _, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Keys: liar, Logger: quiet()}); !errors.Is(err, backup.ErrKeyMismatch) {
		t.Fatalf("import against another key for away: %v", err)
	}
	assertEmpty(t, dst)
	got, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), Keys: directory, Logger: quiet()})
	if err != nil || got.Realms != 2 || got.Heads["away"] != prev || got.Realm != "ainotes" {
		t.Fatalf("import: %+v %v", got, err)
	}
	rn := startNodeAt(t, "", dst)
	heads, _ := rn.Store().Heads()
	if heads["away"] != prev || heads["ainotes"] != res.Heads["ainotes"] {
		t.Fatalf("restored heads %v", heads)
	}
}

func pubKey(seed byte) ed25519.PublicKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)).Public().(ed25519.PublicKey)
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x10
	return b
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("%s holds %v after a refused import", dir, entries)
	}
}

// rewrite re-encodes an export frame by frame: keep (nil: all) drops the
// frames it refuses, n counting each kind from 1; edit changes frames. The
// header and trailer are made to agree, so only the edit is wrong.
func rewrite(t *testing.T, file []byte, keep func(f *backup.Frame, n int) bool, edit func(f *backup.Frame)) []byte {
	t.Helper()
	r, err := backup.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var frames []backup.Frame
	counts := map[backup.Kind]int{}
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		counts[f.Kind]++
		if keep != nil && !keep(&f, counts[f.Kind]) {
			continue
		}
		if edit != nil {
			edit(&f)
		}
		frames = append(frames, f)
	}
	hdr := r.Header()
	hdr.Events = 0
	heads := map[protocol.Realm]protocol.Head{}
	for _, f := range frames {
		if f.Kind == backup.KindEvent {
			hdr.Events++
			ev, c, err := protocol.DecodeEvent(f.Event)
			if err != nil {
				t.Fatal(err)
			}
			heads[protocol.Realm(ev.Realm)] = protocol.Head{Seq: ev.Seq, CID: c}
		}
	}
	var buf bytes.Buffer
	w, err := backup.NewWriter(&buf, hdr, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		switch f.Kind {
		case backup.KindKey:
			err = w.Key(*f.Key)
		case backup.KindSecret:
			err = w.Secret(*f.Secret)
		case backup.KindEvent:
			err = w.Event(f.Event)
		case backup.KindBlob:
			err = w.Blob(*f.Blob)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(heads); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkImport measures an import of an export of 100,000 events (forum
// notes and corpus messages) into a fresh durable data directory, the
// node's first open included: events/s of wall time, and CPU µs per event
// (user and system time of the whole process, the figure that holds on a
// shared machine). Making the export takes a minute or two;
// RELAY_BENCH_IMPORT_FILE names a file that keeps it between runs.
func BenchmarkImport(b *testing.B) {
	const n = 100_000
	var file []byte
	cache := os.Getenv("RELAY_BENCH_IMPORT_FILE")
	if cache != "" {
		file, _ = os.ReadFile(cache)
	}
	if file == nil {
		file = benchExport(b, n)
		if cache != "" {
			if err := os.WriteFile(cache, file, 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
	r, err := backup.NewReader(bytes.NewReader(file))
	if err != nil {
		b.Fatal(err)
	}
	events := r.Header().Events
	for _, all := range []bool{false, true} {
		b.Run(fmt.Sprintf("events=%d/verify-all=%v", events, all), func(b *testing.B) {
			var wall, cpu time.Duration
			for range b.N {
				dst := b.TempDir()
				c0, t0 := cputime.Now(), time.Now()
				res, err := Import(context.Background(), ImportConfig{DataDir: dst, In: bytes.NewReader(file), VerifyAll: all, Logger: quiet()})
				wall, cpu = wall+time.Since(t0), cpu+cputime.Now()-c0
				if err != nil || res.Events != events {
					b.Fatalf("%+v %v", res, err)
				}
			}
			b.ReportMetric(float64(events)*float64(b.N)/wall.Seconds(), "events/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(events)/float64(b.N), "cpu-µs/event")
			b.ReportMetric(float64(len(file))/float64(events), "file-bytes/event")
		})
	}
}

// benchExport makes an export of about n events, forum notes and corpus
// messages half and half, written through the HTTP handler by 64 writers,
// then exported.
func benchExport(b *testing.B, n int) []byte {
	b.Helper()
	dir := b.TempDir()
	cfg := DefaultConfig()
	cfg.P2PAddrs = nil // no federation here
	cfg.Realm, cfg.DataDir, cfg.Logger, cfg.RateLimit = "bench", dir, quiet(), 0
	node, err := Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	secret, err := os.ReadFile(filepath.Join(dir, "operator.token"))
	if err != nil {
		b.Fatal(err)
	}
	operator := strings.TrimSpace(string(secret))
	call := func(method, path, token string, header map[string]string, body any) map[string]any {
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		}
		req := httptest.NewRequest(method, path, rd)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		node.Handler().ServeHTTP(rec, req)
		var out map[string]any
		json.Unmarshal(rec.Body.Bytes(), &out)
		if rec.Code >= 300 {
			b.Errorf("%s %s: %d %s", method, path, rec.Code, rec.Body.Bytes())
		}
		return out
	}
	const writers = 64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			per := n / writers / 2
			th := call("POST", "/api/v1/boards/1/threads", operator, nil, map[string]any{"kind": "note", "body": fmt.Sprintf("writer %d", w)})
			tid := field(th, "thread", "id").(string)
			reg := call("POST", "/register", "", nil, nil)
			agent, ep := reg["agent_id"].(string), reg["endpoint_id"].(string)
			call("GET", "/auth.md", agent, nil, nil)
			conv := call("POST", "/"+ep+"/createConversation", agent, map[string]string{"Operation-Token": "c"},
				map[string]any{"subject": fmt.Sprintf("writer %d", w), "content": "the first message"})["conversation_id"].(string)
			for i := range per {
				call("POST", "/api/v1/threads/"+tid+"/messages", operator, nil, map[string]any{"kind": "note",
					"body": fmt.Sprintf("note %d of writer %d: a sentence or two of the kind agents post, to give the event a realistic size.", i, w)})
				call("POST", "/"+ep+"/appendToConversation/"+conv, agent, map[string]string{"Operation-Token": fmt.Sprint(i)},
					map[string]any{"content": fmt.Sprintf("message %d of writer %d: a sentence or two of the kind agents post, with some words to search.", i, w)})
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	node.Close()
	var buf bytes.Buffer
	if _, err := Export(context.Background(), ExportConfig{DataDir: dir, Out: &buf, WithKey: true, Logger: quiet()}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}
