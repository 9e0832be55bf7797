package testnet

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"relay/federation"
	"relay/protocol"
	"relay/realm"
)

// TestImagesTravelByCID: an image posted at r1 is served at r2, fetched
// from a peer by its CID on first read.
func TestImagesTravelByCID(t *testing.T) {
	net, err := Start(Config{Realms: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	// Noise does not compress: a PNG of about 1 MB, stored in parts.
	img := image.NewRGBA(image.Rect(0, 0, 512, 512))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(rng.Uint32())
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	var out struct {
		Message struct {
			Image struct{ CID, URL string } `json:"image"`
		} `json:"message"`
	}
	env := map[string]any{"kind": "note", "body": "a picture", "image": map[string]any{"data": base64.StdEncoding.EncodeToString(buf.Bytes())}}
	if st := call(t, net.Realms[0], "POST", "/api/v1/boards/lobby/threads", env, &out); st/100 != 2 || out.Message.Image.CID == "" {
		t.Fatalf("post image: %d %+v", st, out)
	}
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(net.Realms[1].URL + out.Message.Image.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("r2 serves the image: %d %s (%d bytes)", resp.StatusCode, resp.Header.Get("Content-Type"), len(got))
	}
}

// openNode starts a realm outside the net, on its own directory.
func openNode(t *testing.T, name string, open bool, p2p string) *realm.Node {
	t.Helper()
	cfg := realm.DefaultConfig()
	cfg.Realm, cfg.DataDir, cfg.HTTPAddr = name, filepath.Join(t.TempDir(), name), "127.0.0.1:0"
	cfg.P2PAddrs, cfg.OpenFederation, cfg.SyncInterval = []string{p2p}, open, time.Second
	n, err := realm.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// TestAdmission: a realm admits only the peers its operator named, unless
// opened; an open realm takes an unnamed realm's events. Over QUIC.
func TestAdmission(t *testing.T) {
	closed := openNode(t, "closed", false, "/ip4/127.0.0.1/udp/0/quic-v1")
	opened := openNode(t, "opened", true, "/ip4/127.0.0.1/udp/0/quic-v1")
	stranger := openNode(t, "stranger", false, "/ip4/127.0.0.1/udp/0/quic-v1")
	ctx := context.Background()
	quic := func(n *realm.Node) string {
		for _, a := range n.Federation().Addrs() {
			if strings.Contains(a, "quic-v1") {
				return a
			}
		}
		t.Fatal("no QUIC address")
		return ""
	}
	// The stranger names both; only the open realm lets it in.
	for _, n := range []*realm.Node{closed, opened} {
		if _, err := stranger.Federation().AddPeer(ctx, quic(n)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		h, _ := opened.Store().Heads()
		if h["stranger"].Seq > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the open realm did not take the stranger's events")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if h, _ := closed.Store().Heads(); h["stranger"].Seq != 0 {
		t.Fatal("a closed realm took an unnamed realm's events")
	}
	for _, p := range closed.Federation().Peers() {
		if p.State == "connected" {
			t.Fatalf("a closed realm is connected to %+v", p)
		}
	}
	// The closed realm's operator learns of the refusals.
	if n := closed.Federation().Counters().Refused["unnamed_peer"]; n == 0 {
		t.Error("the closed realm counts no refused connection from the unnamed realm")
	}
}

// TestRefusedPeerIsTold: a realm removes a peer, whose gate then hangs up
// on it; the removed peer's operator is told why the realm stays away, and
// the peer backs off rather than dial it again and again. Over TCP.
func TestRefusedPeerIsTold(t *testing.T) {
	ctx := context.Background()
	closed := openNode(t, "closed", false, "/ip4/127.0.0.1/tcp/0")
	stranger := openNode(t, "stranger", false, "/ip4/127.0.0.1/tcp/0")
	// Peers, each naming the other; then closed removes the stranger.
	if _, err := stranger.Federation().AddPeer(ctx, closed.Federation().Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := closed.Federation().AddPeer(ctx, stranger.Federation().Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if h, _ := closed.Store().Heads(); h["stranger"].Seq > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the peers never synced")
		}
	}
	if err := closed.Federation().RemovePeer(ctx, stranger.PeerID()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var st federation.PeerStatus
		for _, p := range stranger.Federation().Peers() {
			if p.PeerID == closed.PeerID() {
				st = p
			}
		}
		if st.State == "backoff" && st.LastError != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stranger on the closed realm: %+v", st)
		}
	}
}

// TestKeyConflict: a second key claiming a pinned realm name is refused,
// shown to the operator, and its events are not taken.
func TestKeyConflict(t *testing.T) {
	net, err := Start(Config{Realms: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	if err := net.WaitConverged(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	impostor := openNode(t, "r2", false, "/ip4/127.0.0.1/tcp/0")
	r1 := net.Realms[0]
	ctx := context.Background()
	if _, err := r1.Node.Federation().AddPeer(ctx, impostor.Federation().Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := impostor.Federation().AddPeer(ctx, r1.P2P()); err != nil {
		t.Fatal(err)
	}
	want, _ := net.Realms[1].Node.Store().Heads()
	var status struct {
		Conflicts []struct {
			Realm   string `json:"realm"`
			Claimed string `json:"claimed_peer_id"`
		} `json:"key_conflicts"`
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(status.Conflicts) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		call(t, r1, "GET", "/api/v1/federation", nil, &status)
	}
	if len(status.Conflicts) != 1 || status.Conflicts[0].Realm != "r2" || status.Conflicts[0].Claimed != impostor.PeerID() {
		t.Fatalf("conflicts: %+v", status.Conflicts)
	}
	if k, _ := r1.Node.Federation().Directory().Key("r2"); k == nil {
		t.Fatal("r2 lost its pinned key")
	}
	if h, _ := r1.Node.Store().Heads(); h[protocol.Realm("r2")].CID != want["r2"].CID {
		t.Fatal("r1 took the impostor's events for r2")
	}
}

// TestAddPeerKeepsAddresses: adding a peer again under an address that
// cannot be dialled keeps the address it was known by, behind the new one.
// Before, the new address replaced it, and the peer could not be dialled
// again once the connection dropped.
func TestAddPeerKeepsAddresses(t *testing.T) {
	a := openNode(t, "aa", false, "/ip4/127.0.0.1/tcp/0")
	b := openNode(t, "bb", false, "/ip4/127.0.0.1/tcp/0")
	ctx := context.Background()
	good := b.Federation().Addrs()[0]
	if _, err := a.Federation().AddPeer(ctx, good); err != nil {
		t.Fatal(err)
	}
	bad := "/ip4/127.0.0.1/udp/9/p2p/" + b.PeerID() // UDP without QUIC: no transport dials it
	ps, err := a.Federation().AddPeer(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	goodAddr := strings.TrimSuffix(good, "/p2p/"+b.PeerID())
	if len(ps.Addrs) != 2 || ps.Addrs[0] != "/ip4/127.0.0.1/udp/9" || ps.Addrs[1] != goodAddr {
		t.Fatalf("addresses after adding a bad one: %v, want the bad one, then %s", ps.Addrs, goodAddr)
	}
	// The same address again is not listed twice.
	if ps, err = a.Federation().AddPeer(ctx, good); err != nil || len(ps.Addrs) != 2 || ps.Addrs[0] != goodAddr {
		t.Fatalf("the good address again: %v %v", ps.Addrs, err)
	}
}
