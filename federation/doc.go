// Package federation connects realms: the realm's libp2p identity now, and
// later the host, peering, gossip and catch-up. The realm key is a libp2p
// ed25519 key, so a realm's event-signing key is also its peer ID.
package federation
