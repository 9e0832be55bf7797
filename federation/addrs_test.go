package federation

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

func TestParseAddrs(t *testing.T) {
	id, err := IdentityFromSeed(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	good := "/ip4/127.0.0.1/tcp/4001/p2p/" + id.PeerID.String()
	if got, err := ParsePeers([]string{good}); err != nil || got[0].ID != id.PeerID {
		t.Fatalf("ParsePeers(%q) = %v, %v", good, got, err)
	}
	for _, bad := range []string{"/ip4/127.0.0.1/tcp/4001", "hello", "/ip4/300.0.0.1/tcp/1/p2p/" + id.PeerID.String(), "/p2p/" + id.PeerID.String()} {
		if _, err := ParsePeers([]string{bad}); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
	if _, err := ParseListenAddrs([]string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseListenAddrs([]string{"tcp://0.0.0.0:4001"}); err == nil {
		t.Fatal("a URL passed as a multiaddr")
	}
	// Transports the node does not have, or more than an address, would
	// start a node that listens nowhere.
	for _, bad := range []string{"/ip4/127.0.0.1/udp/4001", "/ip4/127.0.0.1/tcp/4001/ws", "/ip4/127.0.0.1/udp/4001/quic",
		"/ip4/127.0.0.1/tcp/4001/p2p/" + id.PeerID.String(), "/unix/tmp/x", "/dns4/localhost/tcp/4001", "/tcp/4001"} {
		if _, err := ParseListenAddrs([]string{bad}); err == nil {
			t.Errorf("ParseListenAddrs(%q) accepted", bad)
		}
	}
}

func TestIdentityFile(t *testing.T) {
	path := t.TempDir() + "/realm.key"
	a, created, err := LoadOrCreateIdentity(path)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	b, created, err := LoadOrCreateIdentity(path)
	if err != nil || created || a.PeerID != b.PeerID || !a.Signing.Equal(b.Signing) {
		t.Fatalf("reload: %v %v", created, err)
	}
	// A file that holds no key says so, whatever the decoder's words.
	for _, junk := range [][]byte{nil, []byte("ed25519 key\n"), {0x08, 0x01, 0x12, 0x03, 1, 2, 3}} {
		if _, err := ParseIdentity(junk); !errors.Is(err, ErrNotAKey) {
			t.Errorf("ParseIdentity(%q): %v", junk, err)
		}
	}
	// The signing key is the libp2p key: its peer ID derives from it.
	if pub, _ := a.PrivKey.GetPublic().Raw(); string(pub) != string(a.Public()) {
		t.Fatal("signing key is not the libp2p key")
	}
}

func TestCheckListenFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	taken := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)
	if err := CheckListenFree([]string{"/ip4/127.0.0.1/tcp/0", taken}); err == nil || !strings.Contains(err.Error(), "--p2p "+taken) {
		t.Fatalf("a taken port: %v", err)
	}
	if err := CheckListenFree([]string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}); err != nil {
		t.Fatalf("ports the kernel chooses: %v", err)
	}
	if err := CheckListenFree([]string{"garbage"}); err == nil {
		t.Fatal("a bad address passed")
	}
}
